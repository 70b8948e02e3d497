"""The JSON limits every reader of a user's file applies have one home (#25 item 4):
rubrics/json_limits.py, which the import (storage.imports.untrusted) and the metrics' readers
(metrics.untrusted) both use, each in its own error frame."""

from __future__ import annotations

import math

import pytest

import storage.imports.untrusted
from metrics import untrusted
from rubrics import json_limits


class ReaderError(ValueError):
    pass


def test_both_readers_take_the_limits_from_one_module():
    for module in (storage.imports.untrusted, untrusted):
        assert module.MAX_DEPTH == json_limits.MAX_DEPTH
        assert module.MAX_NUMBER_CHARS == json_limits.MAX_NUMBER_CHARS
    assert (storage.imports.untrusted.MAX_INTEGER_DIGITS, untrusted.MAX_INTEGER_DIGITS) == (18, 20)


@pytest.mark.parametrize("number", ["9" * 21, "-" + "9" * 21])
def test_the_same_words_in_both_frames(number):
    with pytest.raises(storage.imports.untrusted.JsonProblem, match="a number with 21 digits "
                                                            r"\(at most 18\)") as caught:
        storage.imports.untrusted.load_json('{"a":\n' + number + "}")
    assert caught.value.line == 2
    with pytest.raises(ReaderError, match=r"^f\.json:2: a number with 21 digits \(at most "
                                          r"20\)$"):
        untrusted.load_json('{"a":\n' + number + "}", "f.json", ReaderError)
    for constant in ("NaN", "-Infinity"):
        with pytest.raises(storage.imports.untrusted.JsonProblem,
                           match=f"{constant} is not a JSON"):
            storage.imports.untrusted.load_json(f'{{"a": {constant}}}')
        with pytest.raises(ReaderError, match=f"{constant} is not a JSON number"):
            untrusted.load_json(f'{{"a": {constant}}}', "f.json", ReaderError)


def test_an_overflowing_real_reaches_the_row_checks_of_an_import_only():
    assert math.isinf(storage.imports.untrusted.load_json('{"p": 1e999}')["p"])
    with pytest.raises(ReaderError, match="1e999 is not a finite number"):
        untrusted.load_json('{"p": 1e999}', "f.json", ReaderError)


def test_nesting():
    assert not json_limits.too_deep([[1]] * 3, limit=2)
    assert json_limits.too_deep([[[1]]], limit=2)
    deep = "[" * 33 + "]" * 33
    with pytest.raises(storage.imports.untrusted.JsonProblem, match="deeper than 32"):
        storage.imports.untrusted.load_json(deep)
    with pytest.raises(ReaderError, match="deeper than 32"):
        untrusted.load_json(deep, "f.json", ReaderError)

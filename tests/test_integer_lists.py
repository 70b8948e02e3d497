"""The vectorised reader of integer ranked-list JSON: what it accepts, it reads exactly as
`json` does; anything else it hands back (None) for `json` to read or refuse."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.retrieval.integer_lists import MAX_THREADS, idle_cores, parse_integer_lists

LARGEST = 2**31 - 1


def _in_shape(data: bytes) -> tuple[list[int], list[list[int]]] | None:
    """(keys, lists) as `json` reads `data` when it is an object of canonical integer
    keys, each with a non-empty list of integers in [0, 2^31); None otherwise."""
    try:
        raw = json.loads(data, object_pairs_hook=lambda pairs: ("object", pairs))
    except ValueError:  # bad JSON or bad UTF-8
        return None
    if not isinstance(raw, tuple) or not raw[1]:
        return None
    keys, lists = [], []
    for key, values in raw[1]:
        if not re.fullmatch(r"0|[1-9][0-9]*", key) or int(key) > LARGEST:
            return None
        if not isinstance(values, list) or not values or not all(
                type(v) is int and 0 <= v <= LARGEST for v in values):
            return None
        keys.append(int(key))
        lists.append(values)
    return keys, lists


def _same(parsed, expected: tuple[list[int], list[list[int]]]) -> None:
    keys, lists = expected
    assert parsed.keys.tolist() == keys
    assert parsed.lengths.tolist() == [len(values) for values in lists]
    assert parsed.values().tolist() == [v for values in lists for v in values]
    assert parsed.lists() == lists
    rows = parsed.rows()
    if len({len(values) for values in lists}) == 1:
        assert rows.tolist() == lists
    else:
        assert rows is None


ids = st.integers(0, 999) | st.integers(0, 10**7 - 1) | st.integers(0, LARGEST)
documents = st.dictionaries(ids.map(str), st.lists(ids, min_size=1, max_size=12),
                            min_size=1, max_size=12)
THREADS = st.sampled_from([1, 3])  # chunks parsed one by one, or three at once
layouts = st.sampled_from([{}, {"indent": 1}, {"indent": "\t"}, {"separators": (",", ":")},
                           {"separators": (" ,\r\n", " :  ")}])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(document=documents, layout=layouts, chunk=st.integers(1, 64), threads=THREADS)
def test_json_in_the_shape_reads_as_json_reads_it(document, layout, chunk, threads):
    data = json.dumps(document, **layout).encode()
    parsed = parse_integer_lists(data, chunk_bytes=chunk, threads=threads)
    assert parsed is not None
    _same(parsed, _in_shape(data))


EDIT_BYTES = b'0123456789 \t\n\r{}[],:"-+.eE\\a\x00\xff\xc3'


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(document=documents, layout=layouts, chunk=st.integers(1, 64), threads=THREADS,
       edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 2),
                                st.sampled_from(EDIT_BYTES)), min_size=1, max_size=3))
def test_any_other_bytes_are_left_to_json(document, layout, chunk, threads, edits):
    """Random insertions, deletions and replacements: the reader either returns what
    json reads (in the shape) or None, never something json would not say."""
    data = bytearray(json.dumps(document, **layout).encode())
    for position, kind, byte in edits:
        at = position % (len(data) + 1)
        if kind == 0:
            data[at:at] = bytes([byte])
        elif at < len(data):
            data[at : at + 1] = b"" if kind == 1 else bytes([byte])
    data = bytes(data)
    parsed = parse_integer_lists(data, chunk_bytes=chunk, threads=threads)
    if parsed is not None:
        expected = _in_shape(data)
        assert expected is not None, data
        _same(parsed, expected)


@pytest.mark.parametrize("text", [
    "", "   ", "{}", "[]", '{"1": []}', '{"1": [2],}', '{"1": [2]} x', '{"1": [2]', '{"1": [2 3]}',
    '{"01": [2]}', '{"1": [02]}', '{"1": [00]}', '{"1": [-2]}', '{"1": [-0]}', '{"1": [2.0]}',
    '{"1": [2e1]}', '{" 1": [2]}', '{"1 ": [2]}', '{"1": [[2]]}', '{"1": 2}', '{1: [2]}',
    '{"1": [2147483648]}', '{"2147483648": [1]}', '{"1": [99999999999999999999]}',
    '{"a": [1]}', '{"1": ["2"]}', '{"1": [2]}\xff', '{"\\u0031": [2]}', '{"1" "2": [3]}',
])
def test_what_the_reader_refuses(text: str):
    assert parse_integer_lists(text.encode("latin-1")) is None


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_uneven_lists_and_chunks_that_end_anywhere(threads: int):
    rng = np.random.default_rng(0)
    document = {str(k): rng.integers(0, 10**6, rng.integers(1, 300)).tolist()
                for k in rng.choice(10**6, 400, replace=False)}
    data = json.dumps(document).encode()
    for chunk in (1, 2, 3, 1000, 1 << 22):
        _same(parse_integer_lists(data, chunk_bytes=chunk, threads=threads), _in_shape(data))


@pytest.mark.parametrize(("running", "expected"), [(1, 2), (2, 1), (3, 1), (9, 1)])
def test_threads_follow_what_runs_now_not_the_last_minute(tmp_path, monkeypatch, running,
                                                          expected):
    """A load average of 1.9 left by a command that has just ended must not keep the
    second core idle: the threads running now (this one included) decide."""
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr("os.getloadavg", lambda: (1.9, 1.9, 1.9))
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"1.90 1.90 1.90 {running}/300 4242\n", encoding="ascii")
    assert idle_cores(loadavg) == expected


def test_without_proc_the_load_average_decides(tmp_path, monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)), raising=False)
    monkeypatch.setattr("os.getloadavg", lambda: (6.0, 6.0, 6.0))
    assert idle_cores(tmp_path / "absent") == 3
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))
    assert idle_cores(tmp_path / "absent") == MAX_THREADS

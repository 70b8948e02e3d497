"""Every reader of a file a user names, from the registry in `tests/readers.py`: the valid
input is read (and reaches the functions the entry names); every mutation of it is read or
refused with the reader's documented error naming the file, never another exception, and
through `thumb` the database is byte-identical (-wal and -shm included) and nothing is left
behind; a poisoned text field is always refused; a FIFO is refused, not waited on. And the
registry is complete: a function that reads a file and is neither registered nor listed
as trusted fails `test_every_function_that_reads_a_file_is_registered`.

THUMB_READER_EXAMPLES (default 50) sets the hypothesis examples per reader;
`benchmarks/fuzz_imports.py` runs 1,000 per reader."""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings

from tests.readers import (
    TRUSTED,
    Example,
    fifo_in_place,
    readers,
    run_example,
    scan,
    scan_source,
    too_long,
)
from tests.readers import called_functions as called
from tests.readers import examples as mutations

EXAMPLES = int(os.environ.get("THUMB_READER_EXAMPLES", "50"))
READERS = {reader.name: reader for reader in readers()}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(READERS))
def test_the_valid_input_is_read_through_the_registered_functions(tmp_path, name):
    reader = READERS[name]
    outcomes = []
    functions = called(lambda: outcomes.append(run_example(
        reader, Example(reader.default(), False, False, "valid"), tmp_path / "work")))
    assert outcomes[0].accepted and outcomes[0].ok, outcomes[0]
    assert set(reader.covers) <= functions, set(reader.covers) - functions


@pytest.mark.slow
@pytest.mark.parametrize("name", list(READERS))
def test_every_mutated_input_is_read_or_refused_by_its_reader(tmp_path_factory, name):
    """The one property over the registry (see `tests.readers.examples`)."""
    reader = READERS[name]
    work = tmp_path_factory.mktemp("reader") / "work"

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.large_base_example])
    @given(example=mutations(reader))
    def example(example: Example) -> None:
        outcome = run_example(reader, example, work)
        assert not outcome.traceback, outcome.traceback
        assert not outcome.wrong_accept, f"{example.kind}: a poisoned text was accepted"
        assert outcome.database_unchanged is not False, "the database changed"
        assert not outcome.files_left, outcome.files_left

    example()


POISON = {"ESC": "\x1b", "OSC 52": "\x1b]52;c;aGk=\x07", "C1": "\x9b", "NUL": "\x00",
          "bidi": "\u202e", "BOM": "\ufeff"}


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, r in READERS.items() if r.texts])
def test_every_text_field_is_checked(tmp_path, name):
    """Each text field of each reader, with each kind of forbidden character inside it
    and at 20,001 characters: refused, naming the file (no wrong accept)."""
    reader = READERS[name]
    for index, text in enumerate(reader.texts):
        assert len(text) >= 2, "poison goes inside a text, never at an end (stripped)"
        for label, character in [*POISON.items(), ("long", None)]:
            texts = list(reader.texts)
            texts[index] = (text[:1] + character + text[1:] if character is not None
                            else too_long(text))
            outcome = run_example(reader, Example(reader.valid(tuple(texts)), True, True,
                                                  "poison"), tmp_path / "work")
            assert outcome.refused and outcome.ok, (text, label, outcome)


@pytest.mark.parametrize("name", list(READERS))
def test_a_fifo_is_refused_not_waited_on(tmp_path, name):
    reader = READERS[name]
    fifo, read = fifo_in_place(reader, tmp_path / "work")
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            read()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():  # blocked in open(): a writer that closes at once releases it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(20)
        pytest.fail(f"{name}: the reader waited on the FIFO")
    assert isinstance(outcome[0], reader.error), repr(outcome[0])
    assert "not a regular file" in str(outcome[0]) and str(fifo) in str(outcome[0])


@pytest.mark.slow
def test_every_function_that_reads_a_file_is_registered():
    """A function in metrics/, storage/, rubrics/, reports/ or thumb_tui/ that reads a file
    (open(), Path.read_text/read_bytes, np.load, json.load, pandas and Arrow readers,
    tomllib.load, Image.open, zipfile…) is a registered reader's or has its reason in
    TRUSTED; a TRUSTED entry the scan no longer finds is stale."""
    found = scan()
    covered = {name for reader in readers() for name in reader.covers}
    unregistered = found - covered - set(TRUSTED)
    assert not unregistered, (
        f"{sorted(unregistered)} read a file but no entry of tests/readers.py covers them: "
        "register the reader (valid input, error, texts) or, for a file thumb-tui itself "
        "wrote or installed, add it to TRUSTED with the reason")
    assert set(TRUSTED) <= found, f"stale TRUSTED entries: {sorted(set(TRUSTED) - found)}"


# Readers that an earlier scan, which knew loaders only by their usual names, missed.
PLANTED_READERS = {
    "pickle_aliased": "import pickle as p\ndef f(h):\n    return p.load(h)",
    "pickle_imported": "from pickle import load\ndef f(h):\n    return load(h)",
    "unpickler": "def f(h):\n    import pickle\n    return pickle.Unpickler(h).load()",
    "arrow_csv_aliased": "from pyarrow import csv as pc\ndef f(p):\n    return pc.read_csv(p)",
    "arrow_csv_stream": "import pyarrow.csv\ndef f(p):\n    return pyarrow.csv.open_csv(p)",
    "arrow_csv_module": "import pyarrow.csv as pacsv\ndef f(p):\n    return pacsv.open_csv(p)",
    "excel_imported": "from pandas import read_excel\ndef f(p):\n    return read_excel(p)",
    "excel_aliased": "import pandas as tables\ndef f(p):\n    return tables.read_excel(p)",
    "file_io": "import io\ndef f(p):\n    return io.FileIO(p).read()",
    "file_io_imported": "from io import FileIO as Raw\ndef f(p):\n    return Raw(p, 'rb')",
    "numpy_aliased": "import numpy as numeric\ndef f(p):\n    return numeric.load(p)",
    "json_imported": "from json import load as parse\ndef f(h):\n    return parse(h)",
    "gzip_open": "import gzip\ndef f(p):\n    return gzip.open(p).read()",
}


@pytest.mark.parametrize(("source", "reads"), [
    ("def f(p):\n    return p.read_text()", True),
    ("def f(p):\n    return Path(p).read_bytes()", True),
    ("def f(p):\n    with open(p) as h:\n        return h.read()", True),
    ("def f(p):\n    with open(p, 'rb') as h:\n        return h.read()", True),
    ("def f(p, mode):\n    return open(p, mode)", True),
    ("def f(p):\n    return np.load(p)", True),
    ("def f(p):\n    return pd.read_csv(p)", True),
    ("def f(p):\n    return pq.read_table(p)", True),
    ("def f(p):\n    with p.open('rb') as h:\n        return tomllib.load(h)", True),
    ("def f(p):\n    return Image.open(p)", True),
    ("def f(p):\n    return json.load(open(p))", True),
    ("def f(p):\n    return os.open(p, os.O_RDONLY)", True),
    ("class C:\n    def g(self):\n        return self.path.read_text()", True),
    ("def f(p):\n    with open(p, 'w') as h:\n        h.write('x')", False),
    ("def f(p):\n    p.open('wb').close()", False),
    ("def f(p):\n    flags = os.O_WRONLY | os.O_CREAT\n    os.close(os.open(p, flags))", False),
    ("def f(text):\n    return json.loads(text)", False),
    ("import io\ndef f(p):\n    return io.FileIO(p, 'w')", False),
    ("from pickle import dumps\ndef f(x):\n    return dumps(x)", False),
    ("import pandas as p\ndef f():\n    return p.DataFrame()", False),
    *((source, True) for source in PLANTED_READERS.values()),
])
def test_the_scan_finds_a_new_reader(source, reads):
    """What makes the registry test fail: a new function that reads a file."""
    assert bool(scan_source(source, "new")) == reads
    if reads:
        assert scan_source(source, "new") <= {"new:f", "new:C.g"}


def test_the_scan_of_the_packages_finds_a_planted_module_of_each_reader(tmp_path):
    """A module planted in a scanned package with each reader the scan once missed (under
    an alias, imported from its module, in a function's own import) is flagged by the
    same scan the registry test runs, one function per reader."""
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "planted.py").write_text("\n\n".join(
        source.replace("def f(", f"def {name}(") for name, source in PLANTED_READERS.items()))
    assert scan(tmp_path) == {f"storage.planted:{name}" for name in PLANTED_READERS}


@pytest.mark.parametrize("existing", [True, False])
def test_an_empty_coco_bison_list_is_refused_with_its_file(tmp_path, existing):
    """Found by the registry's benchmark: `{"data": []}` reached the database as an
    INSERT of no rows ("database error: NOT NULL constraint failed: bison_item.key")."""
    outcome = run_example(READERS["COCO-BISON"], Example(b'{"data": []}\n', False, existing,
                                                         "empty"), tmp_path / "work")
    assert outcome.refused and outcome.ok, outcome


def test_a_parquet_string_that_is_not_utf8_names_the_file(tmp_path):
    """Found by the registry's property: Arrow decodes a string column only when the rows
    are built, so the UnicodeDecodeError came after the read and without the file."""
    reader = READERS["captions Parquet"]
    data = reader.default()
    assert data.count(b"A dog on grass.") >= 1
    outcome = run_example(reader, Example(data.replace(b"A dog on grass.", b"\xc1 dog on grass.",
                                                       1), False, True, "bad UTF-8"),
                          tmp_path / "work")
    assert outcome.refused and outcome.ok, outcome

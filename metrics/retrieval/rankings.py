"""A retrieval model's results for one direction (i2t or t2i), as ranked lists or as a
similarity matrix, behind one question the metrics ask: "the top `depth` items of these
queries, optionally among these items only".

Ranked lists: `{query id: [item ids, best first]}` (the eccv-caption layout). Lists may be
shorter than the item pool (items not listed rank below every listed one) but must not be
empty or repeat an item. Similarity matrices rank by descending score, ties broken by
ascending id (integers before strings). Ids follow `metrics.retrieval.positives.normalize_id`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import NoReturn, Protocol, TypeVar

import numpy as np

from metrics.arrays import sorted_positions
from metrics.retrieval.integer_lists import IntegerLists, idle_cores, parse_integer_lists
from metrics.retrieval.positives import Id, line_of_key, normalize_id, shown
from metrics.untrusted import (
    ID_KINDS,
    REAL_KINDS,
    Npz,
    check_array,
    load_json,
    regular_file,
)
from rubrics.json_limits import utf8_problem

DIRECTIONS = ("i2t", "t2i")
_LOOKUP_LIMIT = 50_000_000  # largest integer id mapped through a lookup table
_SCORE_CHUNK = 8_000_000  # matrix cells ranked at once (64 MB of float64)
_GROUPS_PER_TAKE = 4  # groups of columns whose maxima bound a row's top (_floor_of_top)
_KEPT_DEPTH = 64  # a score matrix's top kept for every row: deeper than the shipped sets' R
_DUPLICATE_CHUNK = 4_000_000  # cells of the (rows x items) scratch of the duplicate check
_ENCODE_CHUNK = 1_000_000  # ids encoded at once


Text = str | Callable[[], str] | None  # a file's text, or how to read it when needed
T = TypeVar("T")


class RankingsError(ValueError):
    """Unusable rankings; the message names the file (and line) when there is one."""


class Ranked(Protocol):
    queries: tuple[Id, ...]
    items: tuple[Id, ...]

    @property
    def row_of(self) -> Mapping[Id, int]: ...

    @property
    def index_of(self) -> Mapping[Id, int]: ...

    def rows_of(self, ids: Sequence[Id]) -> np.ndarray: ...

    def indices_of(self, ids: Sequence[Id]) -> np.ndarray: ...

    def top(self, rows: np.ndarray, depth: int, allowed: np.ndarray | None) -> np.ndarray:
        """(len(rows), depth) item indices, best first; -1 where a list has ended.
        `allowed` (a boolean mask over items) keeps only those items, in ranked order."""
        ...


class _Ids:
    queries: tuple[Id, ...]
    items: tuple[Id, ...]

    @cached_property
    def row_of(self) -> dict[Id, int]:
        return {query: row for row, query in enumerate(self.queries)}

    @cached_property
    def index_of(self) -> dict[Id, int]:
        return {item: index for index, item in enumerate(self.items)}

    def rows_of(self, ids: Sequence[Id]) -> np.ndarray:
        """The row of each query id; -1 for an id that is not a query."""
        return _positions(self._sorted_queries, self.row_of, ids)

    def indices_of(self, ids: Sequence[Id]) -> np.ndarray:
        """The index of each item id; -1 for an id that is not an item."""
        return _positions(self._sorted_items, self.index_of, ids)

    @cached_property
    def _sorted_queries(self) -> tuple[np.ndarray, np.ndarray] | None:
        return _sorted_integers(self.queries)

    @cached_property
    def _sorted_items(self) -> tuple[np.ndarray, np.ndarray] | None:
        return _sorted_integers(self.items)


def _integer_array(ids: Sequence[Id]) -> np.ndarray | None:
    """`ids` as int64 when every one is a plain integer that fits, else None."""
    if not set(map(type, ids)) <= {int}:
        return None
    try:
        return np.array(ids, dtype=np.int64)
    except OverflowError:
        return None


def _sorted_integers(ids: Sequence[Id]) -> tuple[np.ndarray, np.ndarray] | None:
    """(integer ids sorted, their positions), for looking up many ids at once."""
    values = _integer_array(ids)
    if values is None or len(values) == 0:
        return None
    order = np.argsort(values, kind="stable")
    return values[order], order


def _positions(search: tuple[np.ndarray, np.ndarray] | None, mapping: Mapping[Id, int],
               ids: Sequence[Id]) -> np.ndarray:
    """Positions of `ids` (-1: absent), by binary search when both sides are integers."""
    wanted = None if search is None else _integer_array(ids)
    if wanted is None:
        return np.fromiter((mapping.get(i, -1) for i in ids), dtype=np.int64, count=len(ids))
    values, order = search
    at = sorted_positions(values, wanted)
    return np.where(at >= 0, order[at], -1)


@dataclass(frozen=True, eq=False)
class Rankings(_Ids):
    """Ranked lists: row q of `order` holds indices into `items`, best first, -1 padding
    the lists shorter than the longest."""

    queries: tuple[Id, ...]
    items: tuple[Id, ...]
    order: np.ndarray

    def top(self, rows: np.ndarray, depth: int, allowed: np.ndarray | None) -> np.ndarray:
        if allowed is None:
            head = self.order[rows, :depth]
            return _pad(head, depth)
        return _top_allowed(self.order, rows, depth, allowed)


def _pad(head: np.ndarray, depth: int) -> np.ndarray:
    if head.shape[1] >= depth:
        return head
    padded = np.full((head.shape[0], depth), -1, dtype=head.dtype)
    padded[:, : head.shape[1]] = head
    return padded


def _top_allowed(order: np.ndarray, rows: np.ndarray, depth: int, allowed: np.ndarray
                 ) -> np.ndarray:
    """The first `depth` allowed items of each row: scan a prefix wide enough for most
    rows, widen it for the rows that need more."""
    result = np.full((len(rows), depth), -1, dtype=order.dtype)
    share = max(float(allowed.mean()), 1e-6)
    width = min(order.shape[1], int(depth / share * 2) + 16)
    pending = np.arange(len(rows))
    while len(pending):
        head = order[rows[pending], :width]
        keep = (head >= 0) & np.take(allowed, np.maximum(head, 0))  # faster than [ ]
        position = np.cumsum(keep, axis=1) - 1
        take = keep & (position < depth)
        r, c = np.nonzero(take)
        result[pending[r], position[r, c]] = head[r, c]
        found = take.sum(axis=1)
        more = (found < depth) & (width < order.shape[1])
        pending, width = pending[more], min(order.shape[1], width * 4)
    return result


@dataclass(frozen=True, eq=False)
class ScoredRankings(_Ids):
    """A similarity matrix (queries x items); rankings by descending score, ties broken by
    ascending item id. Only the requested top of each row is ever sorted: for the whole
    pool, once per matrix for every row, at least `_KEPT_DEPTH` deep, so that the positive
    sets, PMRP and semantic metrics of one evaluation share one partial sort; a fold's top
    (some items allowed) is filtered from it, and only the rows it is too shallow for
    are ranked again among the allowed items."""

    queries: tuple[Id, ...]
    items: tuple[Id, ...]
    scores: np.ndarray
    # every row's top over the whole pool, once computed (a list: the dataclass is frozen)
    _whole_top: list[np.ndarray] = field(default_factory=list, init=False, repr=False)

    @cached_property
    def _id_rank(self) -> np.ndarray:
        ranked = sorted(range(len(self.items)), key=lambda i: _id_key(self.items[i]))
        rank = np.empty(len(self.items), dtype=np.int64)
        rank[ranked] = np.arange(len(self.items))
        return rank

    @property
    def _transposed(self) -> bool:
        """Stored item by item (a transposed view): rows are read across, not along."""
        return self.scores.flags.f_contiguous and not self.scores.flags.c_contiguous

    def top(self, rows: np.ndarray, depth: int, allowed: np.ndarray | None) -> np.ndarray:
        if allowed is None:
            return self._whole(depth)[rows, :depth]
        # Filtering the whole pool's top keeps its order: it holds a row's first `depth`
        # allowed items when it holds `depth` of them (or ends where the pool does).
        whole = self._whole(depth)
        result = _top_allowed(whole, rows, depth, allowed)
        short = np.flatnonzero((result[:, -1] < 0) & (whole[rows, -1] >= 0))
        if len(short):
            result[short] = self._ranked(rows[short], depth, np.nonzero(allowed)[0])
        return result

    def _whole(self, depth: int) -> np.ndarray:
        """Every row's top over the whole pool, at least `depth` (and `_KEPT_DEPTH`)
        deep, computed once."""
        if not self._whole_top or self._whole_top[0].shape[1] < depth:
            kept = max(depth, _KEPT_DEPTH)
            self._whole_top[:] = [self._ranked_by_columns(kept) if self._transposed
                                  else self._ranked(None, kept, None)]
        return self._whole_top[0]

    def _cells(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """scores[rows][:, columns], gathered along the matrix's memory order: a transposed
        matrix (the t2i view of an images x captions matrix) by its stored rows."""
        if self._transposed:
            return self.scores.T[np.ix_(columns, rows)].T
        return self.scores[np.ix_(rows, columns)]

    def _ranked(self, rows: np.ndarray | None, depth: int, columns: np.ndarray | None
                ) -> np.ndarray:
        """(rows, depth) indices of the best items among `columns` (None: all), -1 past
        the end of the pool, for `rows` (None: every row, read as slices, not copies); a
        chunk of rows at a time, only the scores at or above `_floor_of_top` sorted."""
        width = len(self.items) if columns is None else len(columns)
        count = len(self.queries) if rows is None else len(rows)
        result = np.full((count, depth), -1, dtype=np.int64)
        take = min(depth, width)
        if take == 0 or count == 0:
            return result
        step = max(1, _SCORE_CHUNK // width)
        for start in range(0, count, step):
            chunk = slice(start, start + step) if rows is None else rows[start : start + step]
            block = (self.scores[chunk] if columns is None  # a view: no copy
                     else self._cells(np.asarray(chunk), columns))
            r, c = _cells_at_or_above(block, _floor_of_top(block, take, axis=1))
            self._place(result[start : start + len(block)], r,
                        c if columns is None else columns[c], block[r, c])
        return result

    def _ranked_by_columns(self, depth: int) -> np.ndarray:
        """`_ranked` of every row over the whole pool for a transposed matrix (the t2i view
        of an images x captions matrix), read along its stored rows: every query's floor,
        then the scores at or above it, a block of stored rows at a time."""
        stored = self.scores.T  # items x queries, rows contiguous
        width, count = stored.shape
        result = np.full((count, depth), -1, dtype=np.int64)
        take = min(depth, width)
        if take == 0 or count == 0:
            return result
        floor = _floor_of_top(stored, take, axis=0)
        found = []
        step = max(1, _SCORE_CHUNK // count)
        for start in range(0, width, step):
            block = stored[start : start + step]
            item, query = _cells_at_or_above(block, floor)
            found.append((query, item + start, block[item, query]))
        queries, items, values = (np.concatenate(parts) for parts in zip(*found, strict=True))
        self._place(result, queries, items, values)
        return result

    def _place(self, result: np.ndarray, rows: np.ndarray, items: np.ndarray,
               values: np.ndarray) -> None:
        """Write each row's best candidates into `result` (rows x depth), best first:
        (row, item, score) triples, at least a row's depth of them, ordered by
        descending score, ties by ascending item id."""
        rows, items = _best_first(rows, values, self._id_rank[items], self._by_id_rank)
        first = np.searchsorted(rows, np.arange(len(result)))
        position = np.arange(len(rows)) - first[rows]
        keep = position < result.shape[1]
        result[rows[keep], position[keep]] = items[keep]

    @cached_property
    def _by_id_rank(self) -> np.ndarray:
        """The items in ascending id order (the inverse of `_id_rank`)."""
        return np.argsort(self._id_rank)


def _cells_at_or_above(block: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of the cells of a 2-D block at or above `floor` (which broadcasts
    against it): through the flat positions, six times faster than a 2-D `nonzero`."""
    return np.divmod(np.flatnonzero(block >= floor), block.shape[1])


_SCORE_BITS = 32  # a float32 score's order as an unsigned integer (`_best_first`)


def _best_first(rows: np.ndarray, values: np.ndarray, id_ranks: np.ndarray,
                by_id_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, items) of candidate cells ordered by row, then descending score, then
    ascending item id (`id_ranks`: each cell's item's place in id order; `by_id_rank`:
    the item at each place). float32 scores: one sort of 64-bit keys packing the three
    (the score's bits mapped to their order as unsigned integers), several times faster
    than a three-key `lexsort`, which other scores (float64) go through."""
    rank_bits = max(1, (len(by_id_rank) - 1).bit_length())
    row_bits = max(1, int(rows.max(initial=0)).bit_length())
    if values.dtype != np.float32 or row_bits + _SCORE_BITS + rank_bits > 63:
        order = np.lexsort((id_ranks, -values, rows))
        return rows[order], by_id_rank[id_ranks[order]]
    bits = (values + np.float32(0)).view(np.uint32)  # + 0: -0.0 becomes 0.0, its tie
    negative = bits >= np.uint32(1 << 31)
    descending = np.where(negative, bits, ~bits & np.uint32((1 << 31) - 1))
    keys = rows.astype(np.int64) << (_SCORE_BITS + rank_bits)
    keys |= descending.astype(np.int64) << rank_bits
    keys |= id_ranks
    keys.sort()
    return keys >> (_SCORE_BITS + rank_bits), by_id_rank[keys & ((1 << rank_bits) - 1)]


def _floor_of_top(scores: np.ndarray, take: int, axis: int) -> np.ndarray:
    """Per query, a score at or below its take-th best along `axis` (the items' axis; the
    result keeps it, of length 1, so that it broadcasts against `scores`): the take-th
    best of the maxima of `_GROUPS_PER_TAKE` x take groups of items (those maxima are take
    distinct scores at or above it). Two passes over the scores (the maxima, then the
    comparison against it) instead of a partition of every query's, and few more scores
    at or above it than `take` unless the best ones crowd into a few groups. The groups'
    maxima are one `reduceat` along rows, but across rows (axis 0) a slice of rows at a
    time: each way ten times faster than the other there."""
    width = scores.shape[axis]
    groups = min(width, _GROUPS_PER_TAKE * take)
    bounds = np.arange(groups + 1) * width // groups
    if axis == 1:
        maxima = np.maximum.reduceat(scores, bounds[:-1], axis=1)
    else:
        maxima = np.stack([scores[low:high].max(axis=0)
                           for low, high in pairwise(bounds.tolist())])
    cut = groups - take  # the take-th best maximum sits here once partitioned
    return np.take(np.partition(maxima, cut, axis=axis), [cut], axis=axis)


def _id_key(value: Id) -> tuple[int, int | str]:
    """Ascending id order: integers (numerically), then strings."""
    return (0, value) if isinstance(value, int) else (1, value)


def rankings_from_lists(lists: Mapping[object, Sequence[object]], *, source: str = "rankings",
                        text: str | None = None) -> Rankings:
    """Rankings from `{query: [items…]}` with any id spellings (normalised here). Lists of
    plain integers (the eccv-caption form) are encoded with NumPy, not item by item."""
    queries = [_checked_id(key, source, key, text) for key in lists]
    if len(set(queries)) != len(queries):
        raise RankingsError(f"{source}: a query id appears twice")
    for key, values in lists.items():
        if not isinstance(values, list | tuple | np.ndarray):
            raise RankingsError(f"{source}: the list of query {key!r} is not a list of ids")
    integer_rows = _integer_rows(lists.values())
    if integer_rows is not None:
        lengths = np.array([len(row) for row in integer_rows], dtype=np.int64)
        values = np.concatenate(integer_rows) if integer_rows else np.zeros(0, np.int64)
        item_ids, encoded = _encode_integers(values)
        rankings = Rankings(tuple(queries), item_ids, _pack(encoded, lengths))
    else:
        index_of: dict[Id, int] = {}
        encoded_rows = [[index_of.setdefault(_checked_id(v, source, key, text), len(index_of))
                         for v in values] for key, values in lists.items()]
        lengths = np.array([len(row) for row in encoded_rows], dtype=np.int64)
        flat = np.fromiter((i for row in encoded_rows for i in row), dtype=np.int32,
                           count=int(lengths.sum()))
        rankings = Rankings(tuple(queries), tuple(index_of), _pack(flat, lengths))
    check_lists(rankings, source, text)
    return rankings


def _integer_rows(rows: Iterable[Sequence[object]]) -> list[np.ndarray] | None:
    """Each list as an int64 array when every value is a plain (non-negative, non-bool)
    integer, else None."""
    arrays = []
    for values in rows:
        if isinstance(values, np.ndarray):
            if values.ndim != 1 or values.dtype.kind not in "iu":
                return None
            array = values.astype(np.int64, copy=False)
        else:
            if not all(kind is int or issubclass(kind, np.integer)
                       for kind in set(map(type, values))):
                return None  # strings, floats, bools: each goes through normalize_id
            try:
                array = np.fromiter(values, dtype=np.int64, count=len(values))
            except OverflowError:
                return None
        if len(array) and array.min() < 0:
            return None
        arrays.append(array)
    return arrays


def _encode_integers(values: np.ndarray, *, in_place: bool = False
                     ) -> tuple[tuple[int, ...], np.ndarray]:
    """(distinct ids ascending, the index of each value among them as int32), through a
    lookup table when the ids are small enough. `in_place` overwrites `values` (int32),
    a block at a time, instead of making a second array of that size."""
    encoded = values if in_place else np.empty(values.shape, dtype=np.int32)
    largest = int(values.max()) if values.size else _LOOKUP_LIMIT
    if largest < _LOOKUP_LIMIT:
        present = np.zeros(largest + 1, dtype=bool)
        step = max(1, _ENCODE_CHUNK // max(1, values[:1].size))

        # intp indices: NumPy casts int32 ones element by element, 2.5 times slower
        def mark(block: slice) -> None:  # every thread writes True: no order matters
            present[values[block].astype(np.intp)] = True

        _blockwise(mark, len(values), step)
        item_ids = np.flatnonzero(present)
        lookup = np.full(len(present), -1, dtype=np.int32)
        lookup[item_ids] = np.arange(len(item_ids), dtype=np.int32)

        def encode(block: slice) -> None:
            encoded[block] = np.take(lookup, values[block])  # `take`: faster than [ ]

        _blockwise(encode, len(values), step)
    else:
        item_ids, inverse = np.unique(values, return_inverse=True)
        encoded[...] = inverse.reshape(values.shape)
    return tuple(item_ids.tolist()), encoded


def _pack(encoded: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated rows into a (rows x longest) matrix padded with -1."""
    width = int(lengths.max()) if len(lengths) else 0
    if np.all(lengths == width):
        return encoded.reshape(len(lengths), width)
    order = np.full((len(lengths), width), -1, dtype=np.int32)
    row = np.repeat(np.arange(len(lengths)), lengths)
    column = np.arange(len(encoded)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    order[row, column] = encoded
    return order


def _checked_id(value: object, source: str, query: object, text: str | None) -> Id:
    try:
        return normalize_id(value)
    except ValueError as error:
        where = source if text is None else f"{source}:{line_of_key(text, str(query))}"
        raise RankingsError(f"{where}: query {shown(query)}: {error}") from None


def check_lists(rankings: Rankings, source: str, text: Text = None) -> None:
    """Refuse empty lists and lists that name an item twice (naming the query; `text`,
    the file's text or a function that reads it, gives the line)."""
    items = max(len(rankings.items), 1)
    step = max(1, _DUPLICATE_CHUNK // (items + 1))
    scratches = threading.local()  # one (rows x items) scratch per thread, reused

    def first_problem(rows: slice) -> tuple[int, str] | None:
        block = rankings.order[rows]
        if getattr(scratches, "seen", None) is None:
            scratches.seen = np.empty(min(step, len(rankings.queries)) * (items + 1),
                                      dtype=bool)
        seen = scratches.seen[: len(block) * (items + 1)]  # column `items`: padding
        seen[:] = False
        cells = np.arange(0, len(seen), items + 1, dtype=np.int64)[:, None] + block
        if block.min(initial=0) < 0:
            listed = block >= 0
            lengths = np.count_nonzero(listed, axis=1)
            empty = np.flatnonzero(lengths == 0)
            if len(empty):
                return rows.start + int(empty[0]), "the ranked list is empty"
            cells[~listed] += items - block[~listed]  # the padding column
            seen[cells] = True
            seen.reshape(len(block), items + 1)[:, items] = False
        else:
            lengths = np.full(len(block), block.shape[1])
            seen[cells] = True
        if np.count_nonzero(seen) == lengths.sum():
            return None
        counts = np.count_nonzero(seen.reshape(len(block), items + 1), axis=1)
        row = rows.start + int(np.flatnonzero(counts != lengths)[0])
        values, counts = np.unique(rankings.order[row][rankings.order[row] >= 0],
                                   return_counts=True)
        twice = rankings.items[int(values[counts > 1][0])]
        return row, f"item {twice!r} appears twice in the list"

    # blocks in order: the first block's problem names the first query with one
    problem = next(filter(None, _blockwise(first_problem, len(rankings.queries), step)), None)
    if problem is not None:
        _raise_for_query(rankings, *problem, source, text)


def _blockwise(task: Callable[[slice], T], count: int, step: int) -> list[T]:
    """`task` of each block of `step` rows out of `count`, in order, on the idle cores at
    once (NumPy lets go of the interpreter lock in its loops): encoding a ranking file's
    30 M ids and checking its lists for repeats are single passes over them."""
    blocks = [slice(start, start + step) for start in range(0, count, step)]
    threads = min(idle_cores(), len(blocks))
    if threads <= 1:
        return [task(block) for block in blocks]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(task, blocks))


def _raise_for_query(rankings: Ranked, row: int, message: str, source: str,
                     text: Text) -> NoReturn:
    query = rankings.queries[row]
    if callable(text):
        text = text()
    where = f"{source}:{line_of_key(text, str(query))}" if text is not None else source
    raise RankingsError(f"{where}: query {query!r}: {message}")


def check_known(rankings: Ranked, queries: set[Id] | frozenset[Id] | None,
                items: set[Id] | frozenset[Id] | None, source: str, *,
                kinds: tuple[str, str], text: Text = None, known_as: str = "") -> None:
    """Refuse query or item ids outside the known ones (None: anything goes), naming the
    `source` file and the first query concerned with its line (`text`: the file's text,
    or a function that reads it), or a score matrix's id array; `kinds` name the
    queries' and items' ids (`image`, `caption`), `known_as` what knows them. Queries
    that are all ids of the items' kind are said to look swapped (an i2t file as t2i)."""
    for kind, ids, known in ((kinds[0], rankings.queries, queries),
                             (kinds[1], rankings.items, items)):
        if known is None or known.issuperset(ids):  # one C loop: the usual case
            continue
        unknown = [i for i in ids if i not in known]  # (only once refused)
        among = f"the {kind}s of {known_as}" if known_as else f"the known {kind}s"
        problem = f"not one of {among} ({len(unknown)} unknown {kind} id(s) in all)"
        if ids is rankings.queries and items is not None and items.issuperset(unknown):
            problem += (f"; they are {kinds[1]} ids: are the {kinds[0]}→{kinds[1]} and "
                        f"{kinds[1]}→{kinds[0]} files swapped?")
        if not isinstance(rankings, Rankings):  # a score matrix: name its id array
            raise RankingsError(f"{source}: {kind}_ids: {unknown[0]!r} is {problem}")
        if ids is rankings.queries:
            _raise_for_query(rankings, rankings.row_of[unknown[0]], f"the query is {problem}",
                             source, text)
        listed = np.isin(rankings.order, [rankings.index_of[unknown[0]]]).any(axis=1)
        _raise_for_query(rankings, int(np.flatnonzero(listed)[0]),
                         f"{kind} id {unknown[0]!r} is {problem}", source, text)


# --- files -----------------------------------------------------------------------------



def read_rankings_json(path: Path) -> Rankings:
    """`{query id: [item ids…]}` from a JSON file. Files of integer ids (the eccv-caption
    form) are read by a vectorised parser; any other file (string ids, or an error to
    report with its line) through `json`."""
    path = regular_file(path, RankingsError)
    try:
        parsed = parse_integer_lists(path)
    except OSError as error:
        raise RankingsError(f"{path}: cannot read: {error}") from None
    if parsed is not None and parsed.distinct_keys():  # else json names the key's line
        return _rankings_from_integers(parsed, path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise RankingsError(f"{path}: cannot read: {error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, problem = utf8_problem(data, error.start)
        raise RankingsError(f"{path}:{line}: {problem}") from None
    # flat: every value must be a list of ids (below, and each id is checked), so the
    # file nests no deeper than 2 levels
    raw = load_json(text, path, RankingsError, flat=True, integers=False,
                    object_pairs_hook=_unique_keys(path, text))
    if not isinstance(raw, dict):
        raise RankingsError(f"{path}:1: expected a JSON object {{query id: [item ids…]}}")
    if not raw:
        raise RankingsError(f"{path}:1: no ranked lists (the object is empty)")
    for key, values in raw.items():
        if not isinstance(values, list):
            raise RankingsError(f"{path}:{line_of_key(text, key)}: the value of "
                                f"{shown(key)} must be a list of ids")
    return rankings_from_lists(raw, source=str(path), text=text)


def _rankings_from_integers(parsed: IntegerLists, path: Path) -> Rankings:
    """Rankings over the parsed numbers, encoded in place where every list has the same
    length (the usual full or top-N rankings: no copy of 30 M ids)."""
    rows = parsed.rows()
    if rows is not None:
        item_ids, order = _encode_integers(rows, in_place=True)
    else:
        item_ids, encoded = _encode_integers(parsed.values(), in_place=True)
        order = _pack(encoded, parsed.lengths)
    rankings = Rankings(tuple(parsed.keys.tolist()), item_ids, order)
    check_lists(rankings, str(path), lambda: path.read_text(encoding="utf-8"))
    return rankings


def _unique_keys(path: Path, text: str):
    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        result: dict[str, object] = {}
        for key, value in pairs:
            if key in result:
                raise RankingsError(f"{path}:{line_of_key(text, key)}: query {shown(key)} "
                                    "appears twice")
            result[key] = value
        return result
    return hook


def read_scores(path: Path) -> tuple[np.ndarray, tuple[Id, ...], tuple[Id, ...]]:
    """(scores, image ids, caption ids) from `.npz` (arrays `scores`, `image_ids`,
    `caption_ids`) or Parquet (columns image_id, caption_id, score: one row per pair,
    every pair present); a `.npy` needs ids, so it is refused here.

    An .npz is checked header first (`metrics.untrusted.Npz`): scores a 2-D array of
    real numbers (integers or floats: no bool, complex or object values), ids 1-D integers
    or strings, the shape of the scores (len(image_ids), len(caption_ids)), and each
    member holding exactly the bytes its header declares, before any data is read. Scores
    keep their dtype (float64 stays float64); see `check_scores`."""
    path = regular_file(path, RankingsError)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        scores, images, captions = _scores_from_npz(path)
    elif suffix == ".parquet":
        scores, images, captions = _scores_from_parquet(path)
    else:
        raise RankingsError(f"{path}: a score matrix is a .npz (scores, image_ids, "
                            "caption_ids) or a .parquet (image_id, caption_id, score)")
    return check_scores(scores, images, captions, str(path))


SCORES_ARE = "scores are real numbers (integers or floats)"
IDS_ARE = "ids are integers or strings"


def _scores_from_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with Npz(path, RankingsError) as archive:
        missing = {"scores", "image_ids", "caption_ids"} - set(archive.files)
        if missing:
            raise RankingsError(f"{path}: missing array(s) {', '.join(sorted(missing))}")
        scores = archive.header("scores")
        check_array(scores, f"{path}: scores", RankingsError, kinds=REAL_KINDS,
                    what=SCORES_ARE, ndim=(2,))
        lengths = []
        for name in ("image_ids", "caption_ids"):
            header = archive.header(name)
            if len(header.shape) != 1:
                raise RankingsError(f"{path}: {name} must be one-dimensional")
            check_array(header, f"{path}: {name}", RankingsError, kinds=ID_KINDS,
                        what=IDS_ARE, ndim=(1,))
            lengths.append(header.shape[0])
        if scores.shape != tuple(lengths):
            raise RankingsError(f"{path}: scores has shape {scores.shape}, expected "
                                f"{tuple(lengths)} (images x captions)")
        return archive.array("scores"), archive.array("image_ids"), archive.array(
            "caption_ids")


def _scores_from_parquet(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The matrix of a Parquet file. Arrow may decode a column only when it is used (a
    string column that is not UTF-8), so its errors are caught around all of it."""
    import pyarrow

    try:
        return _parquet_matrix(path)
    except RankingsError:
        raise
    except MemoryError:
        raise RankingsError(f"{path}: does not fit in memory") from None
    except (pyarrow.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError,
            NotImplementedError, OverflowError, RuntimeError, UnicodeError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise RankingsError(f"{path}: not a readable Parquet file ({message})") from None


def _parquet_matrix(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import pandas as pd

    frame = pd.read_parquet(path)
    missing = {"image_id", "caption_id", "score"} - set(frame.columns)
    if missing:
        raise RankingsError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    if frame["score"].dtype.kind not in REAL_KINDS:
        raise RankingsError(f"{path}: score is a {frame['score'].dtype} column; "
                            f"{SCORES_ARE}")
    for column in ("image_id", "caption_id"):
        values = frame[column]
        if values.dtype.kind not in "iu" and pd.api.types.infer_dtype(
                values, skipna=False) != "string":
            raise RankingsError(f"{path}: {column} must hold integers or strings (not "
                                f"{values.dtype}, nulls or other values)")
    scores = frame["score"].to_numpy(dtype=np.float64)
    if not np.isfinite(scores).all():  # (a NaN would read as a missing pair below)
        row = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise RankingsError(f"{path}: {NOT_FINITE} (row {row + 1}: {scores[row]})")
    table = frame.pivot_table(index="image_id", columns="caption_id", values="score",
                              aggfunc="count")
    if len(frame) != table.size or table.isna().any().any() or (table.to_numpy() != 1).any():
        raise RankingsError(f"{path}: needs exactly one score per (image, caption) pair")
    wide = frame.pivot(index="image_id", columns="caption_id", values="score")
    return wide.to_numpy(), wide.index.to_numpy(), wide.columns.to_numpy()


_EXACT = 2**53  # integers beyond it are not all exact in float64
NOT_FINITE = "scores must be finite numbers"


def check_scores(scores: object, images: object, captions: object, source: str
                 ) -> tuple[np.ndarray, tuple[Id, ...], tuple[Id, ...]]:
    """A finite (images x captions) matrix of real numbers with one distinct id per row
    and column. Floats keep their dtype (a float64 file is ranked in float64: casting to
    float32 would turn 1e300 into inf and make near-equal scores ties); integers become
    float64, which they must fit exactly (|x| <= 2^53), so that every score ranks in one
    dtype whose negation does not wrap (unsigned) or overflow."""
    matrix = np.asarray(scores)
    ids = []
    for what, values in (("image_ids", images), ("caption_ids", captions)):
        array = np.asarray(values)
        if array.ndim != 1:
            raise RankingsError(f"{source}: {what} must be one-dimensional")
        try:
            normalized = tuple(normalize_id(v.item() if hasattr(v, "item") else v)
                               for v in array)
        except ValueError as error:
            raise RankingsError(f"{source}: {what}: {error}") from None
        if len(set(normalized)) != len(normalized):
            first: dict[Id, int] = {}
            for position, value in enumerate(normalized):
                if first.setdefault(value, position) != position:
                    raise RankingsError(f"{source}: {what} repeats the id {value!r} (at "
                                        f"positions {first[value]} and {position}, from 0)")
        ids.append(normalized)
    expected = (len(ids[0]), len(ids[1]))
    if matrix.shape != expected:
        raise RankingsError(f"{source}: scores has shape {matrix.shape}, expected "
                            f"{expected} (images x captions)")
    kind = matrix.dtype.kind
    if kind not in REAL_KINDS or (kind == "f" and matrix.dtype.itemsize > 8):
        raise RankingsError(f"{source}: scores are {matrix.dtype} values; {SCORES_ARE}")
    if kind in "iu":
        if matrix.size and (int(matrix.max()) > _EXACT or int(matrix.min()) < -_EXACT):
            raise RankingsError(f"{source}: integer scores beyond 2^53 do not all rank "
                                "exactly; save the scores as float64")
        matrix = matrix.astype(np.float64)
    elif not np.isfinite(matrix).all():
        raise RankingsError(f"{source}: {NOT_FINITE}")
    return matrix, ids[0], ids[1]


def scored_directions(scores: np.ndarray, images: tuple[Id, ...], captions: tuple[Id, ...]
                      ) -> dict[str, ScoredRankings]:
    """The i2t and t2i views of one images x captions matrix."""
    return {"i2t": ScoredRankings(images, captions, scores),
            "t2i": ScoredRankings(captions, images, scores.T)}

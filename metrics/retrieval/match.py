"""Match verification (ECCV Caption, Chun et al. 2022) as pure functions: top-k proposals
from similarity matrices in chunks, batch packing with gold items, gold scoring, vote
aggregation, precision/recall of positive sets against the human-verified ones (the
paper's Table 2) and the overlap of models' rankings (its section 5).

Pairs are (image, caption) integer ids; directions are "i2t" (an image queries captions)
and "t2i" (a caption queries images). Nothing here touches a database."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rubrics.match import ANSWER_VALUES, DEFAULT_RULE, GOLD_RIGHT, RULES

if TYPE_CHECKING:
    from metrics.stats.agreement import UnitSums

DIRECTIONS = ("i2t", "t2i")
GOLD_NEGATIVE_BEYOND = 25
CHUNK_CELLS = 32_000_000  # similarity cells per chunk: 128 MB of float32 (half: float64)


# -- proposals ------------------------------------------------------------------------------

def _check_chunk(chunk: np.ndarray, rows: np.ndarray, columns: np.ndarray | None = None
                 ) -> None:
    """Refuse NaN and infinite scores, naming the first one's row and column (1-based)."""
    bad = ~np.isfinite(chunk)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        value = chunk[row, column]
        column_number = column if columns is None else columns[column]
        raise ValueError(f"the score at row {rows[row] + 1}, column {column_number + 1} is "
                         f"{value} (NaN or infinite scores cannot be ranked)")


def _best_first(scores: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Sort each row of `indices` by descending score, ties by ascending index."""
    order = np.lexsort((indices, -scores), axis=-1)
    return np.take_along_axis(indices, order, axis=-1)


def _top_k_unordered(block: np.ndarray, k: int) -> np.ndarray:
    """Column indices of each row's k highest scores (in row order, not by score); of equal
    scores at the boundary, the lower indices. A partition finds each row's k-th value (no
    index array, no negated copy); one pass collects what lies at or above it."""
    n_rows, n_columns = block.shape
    if k >= n_columns:
        return np.broadcast_to(np.arange(n_columns), block.shape).copy()
    threshold = np.partition(block, n_columns - k, axis=1)[:, n_columns - k]
    rows, columns = np.nonzero(block >= threshold[:, None])  # row-major: ascending columns
    above = block[rows, columns] > threshold[rows]
    above_per_row = np.bincount(rows[above], minlength=n_rows)
    tie = (~above).astype(np.int64)
    ties_before = np.cumsum(tie) - tie  # over the whole block
    row_start = np.searchsorted(rows, np.arange(n_rows))  # every row has its k-th value
    ties_before_in_row = ties_before - ties_before[row_start][rows]
    keep = above | (ties_before_in_row < (k - above_per_row)[rows])
    columns = columns[keep]
    return columns.reshape(n_rows, k)


def _chunk_rows(n_columns: int, itemsize: int = 4) -> int:
    """Rows per chunk: CHUNK_CELLS cells of float32, half as many of float64."""
    return max(1, CHUNK_CELLS * 4 // max(itemsize, 1) // max(n_columns, 1))


_EXACT = 2**53  # integers beyond it are not all exact in float64


def _ranked_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype scores are ranked in: a float matrix's own (float64 stays float64:
    float32 would make 1e300 infinite and near-equal scores ties), float64 for integers
    (whose negation may wrap or overflow)."""
    if dtype.kind == "f" and dtype.itemsize <= 8:
        return dtype
    if dtype.kind in "iu":
        return np.dtype(np.float64)
    raise ValueError(f"scores are {dtype} values; scores are real numbers (integers or "
                     "floats)")


def _scores_chunk(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`block` read into memory in the ranked dtype (integers checked to be exact)."""
    chunk = np.asarray(block)
    if chunk.dtype.kind in "iu" and chunk.size and (
            int(chunk.max()) > _EXACT or int(chunk.min()) < -_EXACT):
        raise ValueError("integer scores beyond 2^53 do not all rank exactly; save the "
                         "scores as float64")
    return chunk.astype(dtype, copy=False)


def top_k_rows(matrix: np.ndarray, k: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Column indices of the k highest scores of each row (or of the rows listed), best
    first, ties to the lower index. Reads `matrix` (a memory map is fine) in row chunks,
    never holding more than one; scores are ranked in their own dtype (`_ranked_dtype`)."""
    rows = np.arange(matrix.shape[0]) if rows is None else np.asarray(rows)
    n_columns = matrix.shape[1]
    dtype = _ranked_dtype(matrix.dtype)
    k = min(k, n_columns)
    out = np.empty((len(rows), k), dtype=np.int64)
    step = _chunk_rows(n_columns, dtype.itemsize)
    for start in range(0, len(rows), step):
        chosen = rows[start:start + step]
        chunk = _scores_chunk(matrix[chosen[0]:chosen[-1] + 1] if _contiguous(chosen)
                              else matrix[chosen], dtype)
        _check_chunk(chunk, chosen)
        part = _top_k_unordered(chunk, k)
        scores = np.take_along_axis(chunk, part, axis=1)
        out[start:start + len(chunk)] = _best_first(scores, part)
    return out


def top_k_columns(matrix: np.ndarray, k: int, columns: np.ndarray | None = None
                  ) -> np.ndarray:
    """Row indices of the k highest scores of each column (or of the columns listed), best
    first, from row chunks: a running top k per column is merged with each chunk's, so the
    matrix is read once, row-major."""
    n_rows = matrix.shape[0]
    columns = np.arange(matrix.shape[1]) if columns is None else np.asarray(columns)
    whole = len(columns) == matrix.shape[1] and _contiguous(columns)
    dtype = _ranked_dtype(matrix.dtype)
    k = min(k, n_rows)
    best_scores = np.full((k, len(columns)), -np.inf, dtype=dtype)
    best_rows = np.full((k, len(columns)), np.iinfo(np.int64).max, dtype=np.int64)
    step = _chunk_rows(matrix.shape[1], dtype.itemsize)
    positions = np.arange(len(columns))
    for start in range(0, n_rows, step):
        chunk = _scores_chunk(matrix[start:start + step], dtype)
        chunk = chunk if whole else chunk[:, columns]
        _check_chunk(chunk, np.arange(start, start + len(chunk)), columns)
        part = _top_k_unordered(np.ascontiguousarray(chunk.T), min(k, len(chunk))).T
        scores = np.vstack([best_scores, chunk[part, positions]])
        found = np.vstack([best_rows, part + start])
        order = np.lexsort((found, -scores), axis=0)[:k]
        best_scores = np.take_along_axis(scores, order, axis=0)
        best_rows = np.take_along_axis(found, order, axis=0)
    return best_rows.T.copy()


def _contiguous(indices: np.ndarray) -> bool:
    return len(indices) > 0 and indices[-1] - indices[0] + 1 == len(indices) and bool(
        (np.diff(indices) == 1).all())


@dataclass(frozen=True)
class ScoreFile:
    """A model's image x caption similarities as read from a file: `scores` (possibly a
    read-only memory map) with the image id of each row and the caption id of each column,
    as strings."""

    scores: np.ndarray
    image_keys: list[str]
    caption_keys: list[str]


def read_score_file(path: Path, image_keys: Path | None = None,
                    caption_keys: Path | None = None) -> ScoreFile:
    """A model's similarities: `.npy` (memory mapped, so a 5,000 x 25,000 matrix is read in
    chunks; ids from `image_keys` / `caption_keys`, one per line, in row and column order),
    or what `metrics.retrieval.rankings.read_scores` reads (`.npz` with arrays scores, image_ids,
    caption_ids; Parquet with image_id, caption_id, score). A `.npy` header is checked
    before it is mapped: a 2-D array of real numbers (no bool, complex or object values)
    of the shape the id files give, in a file that holds exactly those bytes. Scores keep
    their dtype. RankingsError (a ValueError) names the file and the problem."""
    from metrics.retrieval.rankings import RankingsError, read_scores
    from metrics.untrusted import REAL_KINDS, open_npy

    if path.suffix.lower() != ".npy":
        scores, images, captions = read_scores(path)
        return ScoreFile(scores, [str(i) for i in images], [str(c) for c in captions])
    if image_keys is None or caption_keys is None:
        raise RankingsError(f"{path}: a .npy matrix needs --image-keys and --caption-keys "
                            "files (one id per line, in row and column order)")
    images, captions = _key_lines(image_keys), _key_lines(caption_keys)
    scores = open_npy(path, RankingsError, kinds=REAL_KINDS, shape=(len(images),
                                                                   len(captions)),
                      what="scores are real numbers (integers or floats)",
                      expected=f"the id files name {len(images)} images and {len(captions)} "
                               "captions")
    return ScoreFile(scores, images, captions)


def _key_lines(path: Path) -> list[str]:
    from metrics.retrieval.rankings import RankingsError
    from metrics.untrusted import regular_file
    from rubrics.escape import text_refusal
    from rubrics.json_limits import utf8_problem

    regular_file(path, RankingsError)
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except OSError as exc:
        raise RankingsError(f"{path}: cannot read ids: {exc}") from None
    except UnicodeDecodeError as exc:
        line, problem = utf8_problem(data, exc.start)
        raise RankingsError(f"{path}:{line}: {problem}") from None
    keys = []
    first_line: dict[str, int] = {}
    # lines end at LF only: str.splitlines() also breaks at C1 and Unicode separators,
    # which would hide them from the check and put problems on the wrong lines
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")  # CR LF line ends
        problem = text_refusal(line)  # an id is an imported text like any other
        if problem is not None:
            raise RankingsError(f"{path}:{number}: {problem}")
        key = line.strip()
        if key in first_line:
            raise RankingsError(f"{path}:{number}: id {key!r} appears twice (first at line "
                                f"{first_line[key]})")
        if key:
            first_line[key] = number
            keys.append(key)
    return keys


def proposals(top_lists: dict[str, tuple[np.ndarray, np.ndarray]], k: int,
              caption_image: dict[int, int]) -> pd.DataFrame:
    """A model's candidates: each query's top k in every direction it ran, its known
    positives (a caption's own image) left out. `top_lists` maps a direction to (query ids,
    items best first) with image ids as queries for i2t and caption ids for t2i. Columns:
    image, caption, direction, rank (1 = best)."""
    frames = []
    for direction, (queries, items) in top_lists.items():
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be i2t or t2i, not {direction!r}")
        kept = items[:, :k]
        ranks = np.broadcast_to(np.arange(1, kept.shape[1] + 1), kept.shape)
        query = np.repeat(queries, kept.shape[1])
        images, captions = (query, kept.ravel()) if direction == "i2t" else (kept.ravel(),
                                                                               query)
        frame = pd.DataFrame({"image": images.astype(np.int64),
                              "caption": captions.astype(np.int64),
                              "direction": direction, "rank": ranks.ravel()})
        own = frame["caption"].map(caption_image)
        frames.append(frame[own.to_numpy() != frame["image"].to_numpy()])
    if not frames:
        return pd.DataFrame(columns=["image", "caption", "direction", "rank"])
    return pd.concat(frames, ignore_index=True)


def near_pair_codes(top_lists: Iterable[dict[str, tuple[np.ndarray, np.ndarray]]],
                    depth: int, n_captions_code: int) -> np.ndarray:
    """Sorted codes (image * n_captions_code + caption) of every pair some model ranks in
    its top `depth`, in any direction it ran."""
    codes = []
    for lists in top_lists:
        for direction, (queries, items) in lists.items():
            kept = items[:, :depth]
            query = np.repeat(queries, kept.shape[1]).astype(np.int64)
            images, captions = (query, kept.ravel()) if direction == "i2t" else (
                kept.ravel().astype(np.int64), query)
            codes.append(images * n_captions_code + captions)
    return np.unique(np.concatenate(codes)) if codes else np.empty(0, dtype=np.int64)


# -- batches --------------------------------------------------------------------------------

def check_batch_size(size: int) -> None:
    if size < 3:
        raise ValueError(f"batch size must be at least 3 (one candidate, one known positive "
                         f"and one known negative), not {size}")


def pack_batches(n_candidates: int, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Candidates (by index) shuffled into batches of `size` - 2, leaving room for one known
    positive and one known negative per batch."""
    check_batch_size(size)
    order = rng.permutation(n_candidates)
    per_batch = size - 2
    return [order[start:start + per_batch] for start in range(0, n_candidates, per_batch)]


def draw_negatives(count: int, images: np.ndarray, captions: np.ndarray,
                   excluded_codes: np.ndarray, n_captions_code: int,
                   rng: np.random.Generator) -> np.ndarray:
    """`count` distinct (image, caption) pairs, as rows of an array, whose codes are not in
    the sorted `excluded_codes` (pairs a model ranks near the top, known positives, pairs
    already in use). Raises ValueError when too few such pairs exist."""
    chosen: list[int] = []
    taken = set()
    total = len(images) * len(captions)
    for _ in range(50):
        need = count - len(chosen)
        if need <= 0:
            break
        draw = max(need * 4, 64)
        codes = (images[rng.integers(0, len(images), draw)].astype(np.int64) * n_captions_code
                 + captions[rng.integers(0, len(captions), draw)])
        position = np.searchsorted(excluded_codes, codes)
        position = np.minimum(position, max(len(excluded_codes) - 1, 0))
        free = codes if len(excluded_codes) == 0 else codes[excluded_codes[position] != codes]
        for code in free.tolist():
            if code not in taken:
                taken.add(code)
                chosen.append(code)
                if len(chosen) == count:
                    break
    if len(chosen) < count:
        free_total = total - len(excluded_codes)
        raise ValueError(f"found {len(chosen)} of the {count} known negatives needed: "
                         f"{max(free_total, 0)} of {total} pairs lie beyond every model's "
                         "top ranks")
    result = np.array(chosen, dtype=np.int64)
    return np.stack([result // n_captions_code, result % n_captions_code], axis=1)


# -- quality control ------------------------------------------------------------------------

def gold_correct(gold: pd.Series, answer: pd.Series) -> pd.Series:
    """A known positive is answered right with 'yes' or 'partially yes', a known negative
    with 'mostly no' or '100% no'. NaN where the item is not gold or unanswered."""
    right = np.where(gold == "positive", answer.isin(GOLD_RIGHT["positive"]),
                     answer.isin(GOLD_RIGHT["negative"]))
    return pd.Series(right, index=answer.index).where(gold.notna() & answer.notna())


def quality_tables(answers: pd.DataFrame, rushed_seconds: float
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per annotator and per claimed batch: pairs answered, gold right/total, gold accuracy,
    median seconds per pair and rushed pairs (answered faster than `rushed_seconds`). A batch
    with a wrong gold answer is flagged for checking. `answers` has one row per answered
    item: annotator, batch, claim, status, gold, answer, seconds."""
    if rushed_seconds < 0:
        raise ValueError("rushed seconds must be non-negative")
    data = answers.dropna(subset=["answer"]).copy()
    data["gold_right"] = gold_correct(data["gold"], data["answer"])
    data["is_gold"] = data["gold"].notna()
    data["rushed"] = data["seconds"] < rushed_seconds

    def summarise(keys: list[str]) -> pd.DataFrame:
        grouped = data.groupby(keys, sort=True)
        table = pd.DataFrame({
            "pairs": grouped.size(),
            "gold_right": grouped["gold_right"].sum().astype(int),
            "gold_total": grouped["is_gold"].sum().astype(int),
            "median_seconds": grouped["seconds"].median(),
            "rushed": grouped["rushed"].sum().astype(int),
        }).reset_index()
        table["gold_accuracy"] = (table["gold_right"] / table["gold_total"]).where(
            table["gold_total"] > 0)
        return table

    columns = ["annotator", "pairs", "gold_right", "gold_total", "gold_accuracy",
               "median_seconds", "rushed"]
    if data.empty:
        return (pd.DataFrame(columns=columns),
                pd.DataFrame(columns=["batch", *columns, "status", "flagged"]))
    per_annotator = summarise(["annotator"])[columns]
    per_batch = summarise(["batch", "annotator", "status"])
    per_batch["flagged"] = per_batch["gold_right"] < per_batch["gold_total"]
    return per_annotator, per_batch[["batch", *columns, "status", "flagged"]]


# -- aggregation ----------------------------------------------------------------------------

def aggregate_votes(votes: pd.DataFrame, rule: str = "yes+partial", min_votes: int = 1
                    ) -> pd.DataFrame:
    """Per pair (columns image, caption): votes, positive votes and the verdict. A pair is
    positive when more than half of its votes are positive answers under `rule` ('yes':
    100% yes only; 'yes+partial': 100% yes or partially yes), negative when fewer than
    half are; a pair split evenly (a tie: no majority either way) or with fewer than
    `min_votes` votes is undecided (verdict NaN)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, not {rule!r}")
    if min_votes < 1:
        raise ValueError(f"min votes must be at least 1, not {min_votes}")
    data = votes.dropna(subset=["answer"])
    unknown = sorted(set(data["answer"].astype(int)) - set(ANSWER_VALUES))
    if unknown:
        raise ValueError(f"answers must be 1-4, found {unknown[0]}")
    data = data.assign(positive=data["answer"].isin(RULES[rule]))
    table = data.groupby(["image", "caption"]).agg(votes=("answer", "size"),
                                                    positive_votes=("positive", "sum"))
    table = table.reset_index()
    table["positive_votes"] = table["positive_votes"].astype(int)
    verdict = table["positive_votes"] * 2 > table["votes"]
    tie = table["positive_votes"] * 2 == table["votes"]
    table["verdict"] = verdict.where((table["votes"] >= min_votes) & ~tie)
    return table


# Table 2's columns and what each holds (the JSON output carries these descriptions).
QUALITY_COLUMNS = {
    "direction": "i2t: images query captions; t2i: captions query images",
    "queries": "queries with positives in the existing set r",
    "queries_kept": "queries with a positive shown to people (r'_i = r_i ∩ h_i not "
                    "empty, h_i: the query's pairs shown, verdict or not): precision's "
                    "mean runs over them",
    "recall_queries": "kept queries with a human-verified positive (t_i not empty): "
                      "recall's mean runs over them",
    "recall_dropped": "kept queries without a human-verified positive (t_i empty), left "
                      "out of recall's mean",
    "precision": "ECCV Caption Table 2 (section 3.3): mean over kept queries of "
                 "|r'_i ∩ t_i| / |r'_i|",
    "recall": "ECCV Caption Table 2 (section 3.3): mean over recall_queries of "
              "1 - |t_i \\ r'_i| / |t_i|",
    "size": "pairs in r",
    "judged": "pairs in r' = r ∩ h (h: pairs shown to people, verdict or not)",
    "verified_positives": "human-verified positive pairs whose query is a query of r",
    "hits": "pairs in r' verified positive",
    "pooled_precision": "pooled over pairs, not the paper's: hits / judged",
    "pooled_recall": "pooled over pairs, not the paper's: hits / verified_positives",
}


def positive_set_quality(existing: pd.DataFrame, verified: pd.DataFrame) -> pd.DataFrame:
    """ECCV Caption Table 2 for one existing positive set, per direction, as its section
    3.3 defines it. For query i (an image for i2t, a caption for t2i): r_i its positives
    in the existing set, h_i its pairs shown to people (every pair of `verified`, with a
    verdict or not: a tie or too few votes leaves a shown pair undecided, and it counts
    as not verified positive), r'_i = r_i ∩ h_i (only shown pairs can be checked), t_i its
    human-verified positives. Queries with r'_i = ∅ are dropped; over the others
    (`queries_kept`)
        precision = mean_i |r'_i ∩ t_i| / |r'_i|,
        recall    = mean_i (1 - |t_i \\ r'_i| / |t_i|)
    where recall leaves out the kept queries with t_i = ∅ (their term is 0/0: nothing
    verified positive to recall; `recall_dropped` counts them, `recall_queries` is the
    rest). Beside them, pooled over pairs (the figures this tool reported before, not
    the paper's): pooled_precision = |r' ∩ p| / |r'| and pooled_recall = |r' ∩ p| / |p_d|,
    with r' = r ∩ h, p the verified positives and p_d those whose query is a query of r.

    `existing` has direction, image, caption; `verified` has image, caption, verdict
    (bool; NaN: shown but undecided), one row per pair shown. Returns one row per
    direction with QUALITY_COLUMNS: queries (of r), queries_kept, recall_queries,
    recall_dropped, precision, recall, size (|r|), judged (|r'|), verified_positives
    (|p_d|), hits (|r' ∩ p|), pooled_precision, pooled_recall; NaN where a mean has no
    term."""
    h = verified[["image", "caption"]].drop_duplicates()
    decided = verified.dropna(subset=["verdict"])
    positive = decided["verdict"].astype(bool).to_numpy()
    p = decided.loc[positive, ["image", "caption"]].drop_duplicates()
    rows = []
    for direction in DIRECTIONS:
        query = "image" if direction == "i2t" else "caption"
        r = existing.loc[existing["direction"] == direction, ["image", "caption"]
                         ].drop_duplicates()
        queries = r[query].drop_duplicates()
        # r' with, per pair, whether it is verified positive
        judged = r.merge(h, on=["image", "caption"]).merge(
            p.assign(hit=True), on=["image", "caption"], how="left")
        judged["hit"] = judged["hit"].notna()
        per_query = judged.groupby(query).agg(judged=("hit", "size"), hits=("hit", "sum"))
        t_sizes = p[p[query].isin(queries)].groupby(query).size()  # |t_i|, queries of r
        per_query["t"] = t_sizes.reindex(per_query.index, fill_value=0)
        # every kept query has |r'_i| > 0; r'_i ∩ t_i are its hits, so
        # 1 - |t_i \ r'_i| / |t_i| = hits / |t_i|
        precision_terms = per_query["hits"] / per_query["judged"]
        with_positives = per_query[per_query["t"] > 0]
        recall_terms = with_positives["hits"] / with_positives["t"]
        size, n_judged, hits = len(r), len(judged), int(judged["hit"].sum())
        n_verified = int(t_sizes.sum())
        rows.append({
            "direction": direction, "queries": len(queries),
            "queries_kept": len(per_query), "recall_queries": len(with_positives),
            "recall_dropped": len(per_query) - len(with_positives),
            "precision": float(precision_terms.mean()) if len(per_query) else np.nan,
            "recall": float(recall_terms.mean()) if len(with_positives) else np.nan,
            "size": size, "judged": n_judged, "verified_positives": n_verified,
            "hits": hits,
            "pooled_precision": hits / n_judged if n_judged else np.nan,
            "pooled_recall": hits / n_verified if n_verified else np.nan})
    return pd.DataFrame(rows, columns=list(QUALITY_COLUMNS))


# -- model bias -----------------------------------------------------------------------------

def model_bias(proposed: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per proposing model (paper section 5): candidates proposed, how many humans decided,
    how many were verified positive, the share positive among decided, and how many of its
    positives no other model proposed. `proposed` has model, image, caption (any
    directions); `verdicts` has image, caption, verdict."""
    pairs = proposed.drop_duplicates(["model", "image", "caption"])
    merged = pairs.merge(verdicts[["image", "caption", "verdict"]], on=["image", "caption"],
                         how="left")
    proposers = merged.groupby(["image", "caption"])["model"].transform("nunique")
    merged["positive"] = merged["verdict"].eq(True)
    merged["decided"] = merged["verdict"].notna()
    merged["only_this_model"] = merged["positive"] & (proposers == 1)
    table = merged.groupby("model").agg(candidates=("image", "size"),
                                        decided=("decided", "sum"),
                                        positives=("positive", "sum"),
                                        unique_positives=("only_this_model", "sum"))
    table = table.astype(int).reset_index()
    table["positive_share"] = (table["positives"] / table["decided"]).where(
        table["decided"] > 0)
    return table


def kendall_tau_top_lists(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Kendall tau-b per query between two models' top lists (rows: the same queries, items
    best first). Over the union of both lists, an item missing from a list ranks below all
    of its items (tied there); NaN where one ranking has no untied pair."""
    if first.shape[0] != second.shape[0]:
        raise ValueError("both models need the same queries")
    depth_a, depth_b = first.shape[1], second.shape[1]
    out = np.empty(first.shape[0])
    step = 2000
    for start in range(0, first.shape[0], step):
        a, b = first[start:start + step], second[start:start + step]
        items = np.concatenate([a, b], axis=1)
        in_a = items[:, :, None] == a[:, None, :]
        in_b = items[:, :, None] == b[:, None, :]
        rank_a = np.where(in_a.any(-1), in_a.argmax(-1), depth_a).astype(np.int16)
        rank_b = np.where(in_b.any(-1), in_b.argmax(-1), depth_b).astype(np.int16)
        valid = np.concatenate([np.ones(a.shape, bool), ~in_a[:, depth_a:].any(-1)], axis=1)
        sign_a = np.sign(rank_a[:, :, None] - rank_a[:, None, :])
        sign_b = np.sign(rank_b[:, :, None] - rank_b[:, None, :])
        mask = valid[:, :, None] & valid[:, None, :]
        concordance = (sign_a * sign_b * mask).sum(axis=(1, 2), dtype=np.int64)
        untied_a = (np.abs(sign_a) * mask).sum(axis=(1, 2), dtype=np.int64)
        untied_b = (np.abs(sign_b) * mask).sum(axis=(1, 2), dtype=np.int64)
        denominator = np.sqrt(untied_a.astype(float) * untied_b)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + step] = np.where(denominator > 0,
                                               concordance / denominator, np.nan)
    return out


def model_overlap(lists: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]], k: int
                  ) -> pd.DataFrame:
    """For every two models and direction both ran: the queries they share, the mean
    overlap of their top k (|A ∩ B| / k) and the mean Kendall tau-b of their top lists."""
    rows = []
    names = sorted(lists)
    for index, name_a in enumerate(names):
        for name_b in names[index + 1:]:
            for direction in DIRECTIONS:
                if direction not in lists[name_a] or direction not in lists[name_b]:
                    continue
                queries_a, items_a = lists[name_a][direction]
                queries_b, items_b = lists[name_b][direction]
                shared, where_a, where_b = np.intersect1d(queries_a, queries_b,
                                                          return_indices=True)
                if len(shared) == 0:
                    continue
                a, b = items_a[where_a], items_b[where_b]
                top_a, top_b = a[:, :k], b[:, :k]
                overlap = (top_a[:, :, None] == top_b[:, None, :]).any(-1).sum(1) / k
                tau = kendall_tau_top_lists(a, b)
                rows.append({"model_a": name_a, "model_b": name_b, "direction": direction,
                             "queries": len(shared), "overlap_at_k": float(overlap.mean()),
                             "kendall_tau": float(np.nanmean(tau)) if np.isfinite(
                                 tau).any() else np.nan})
    return pd.DataFrame(rows, columns=["model_a", "model_b", "direction", "queries",
                                       "overlap_at_k", "kendall_tau"])


def verifier_agreement(votes: pd.DataFrame, *, rule: str = DEFAULT_RULE,
                       bootstrap: int = 1000, ci: float = 0.90, seed: int = 0
                       ) -> pd.DataFrame:
    """Agreement between redundant verifiers over long-format votes (pair, annotator,
    answer): Krippendorff's alpha (ordinal, on the four answers; nominal, on the verdict
    under `rule`) over every verifier, and Cohen's kappa (linear on the answers, unweighted
    on the verdict) per two verifiers, each with a BCa bootstrap CI over pairs (the
    jackknife leaves one pair out; `metrics.stats.confidence`). Tidy records {statistic, pair,
    value, ci_low, ci_high, n, note, ci_warning}; a statistic that cannot be computed is
    reported undefined with the reason, never NaN; `ci_warning` says why a CI deserves
    less trust."""
    from metrics.stats.agreement import (
        UndefinedStatistic,
        alpha_from_matrix,
        alpha_sums,
        kappa_from_pairs,
        kappa_sums,
        resampled,
    )
    from metrics.stats.confidence import bca_ci, check_ci

    check_ci(ci)
    data = votes.dropna(subset=["answer"]).astype({"answer": float})
    data = data.assign(verdict=data["answer"].isin(RULES[rule]).astype(float))
    shared = data.groupby("pair")["annotator"].nunique()
    data = data[data["pair"].isin(shared[shared >= 2].index)]
    rng = np.random.default_rng(seed)
    records = []

    def record(statistic: str, who: str, frame: pd.DataFrame, column: str,
               value_of: Callable[[np.ndarray], float],
               sums_of: Callable[[np.ndarray], UnitSums]) -> None:
        """One statistic of `column` over the pairs of `frame`, from its annotators x
        pairs matrix (pairs in order of appearance, the units the bootstrap draws)."""
        units = frame["pair"].unique()
        matrix = frame.pivot_table(index="annotator", columns="pair", values=column,
                                   aggfunc="first").reindex(columns=units).to_numpy(float)
        row = {"statistic": statistic, "pair": who, "value": None, "ci_low": None,
               "ci_high": None, "n": len(units), "note": None, "ci_warning": None}
        estimate = None
        try:
            estimate = value_of(matrix)
            row["value"] = round(estimate, 12) + 0.0
        except UndefinedStatistic as exc:
            row["note"] = f"undefined: {exc}"
        if estimate is not None and bootstrap and len(units) >= 2:
            [values], [jackknife] = resampled([sums_of(matrix)], np.arange(len(units)),
                                              len(units), bootstrap, rng)
            if np.isfinite(values).any():
                interval = bca_ci(values, estimate, jackknife, ci, unit="pairs")
                row["ci_low"], row["ci_high"] = (round(interval.low, 12) + 0.0,
                                                 round(interval.high, 12) + 0.0)
                row["ci_warning"] = interval.warning
        records.append(row)

    for column, level in (("answer", "ordinal"), ("verdict", "nominal")):
        record(f"alpha_{level}:{column}", "all", data, column,
               lambda m, lv=level: alpha_from_matrix(m, lv),
               lambda m, lv=level: alpha_sums(m, lv))
    names = sorted(data["annotator"].unique())
    for index, first in enumerate(names):
        for second in names[index + 1:]:
            both = data[data["annotator"].isin([first, second])]
            counts = both.groupby("pair")["annotator"].nunique()
            both = both[both["pair"].isin(counts[counts == 2].index)]
            if both.empty:
                continue
            for column, weights in (("answer", "linear"), ("verdict", None)):
                categories = list(ANSWER_VALUES) if column == "answer" else [0.0, 1.0]
                # the matrix's rows are the two annotators in sorted order: `first`'s first
                record(f"kappa_{weights or 'unweighted'}:{column}", f"{first}|{second}", both,
                       column, lambda m, w=weights, c=categories: kappa_from_pairs(*m, w, c),
                       lambda m, w=weights, c=categories: kappa_sums(*m, w, c))
    return pd.DataFrame(records, columns=["statistic", "pair", "value", "ci_low", "ci_high",
                                          "n", "note"])


def plan_batches(candidates: np.ndarray, *, image_ids: np.ndarray, caption_ids: np.ndarray,
                 caption_image: np.ndarray, excluded_codes: np.ndarray,
                 true_captions: np.ndarray, gold_captions: set[int], size: int,
                 rng: np.random.Generator, code: int
                 ) -> list[list[tuple[int, int, str | None]]]:
    """Batches of (image, caption, gold) in display position order: `size` - 2 candidates
    (rows of image and caption ids), one known positive (a caption with its own image,
    drawn from `true_captions`, the positions in `caption_ids` of captions known to be
    true of their image; those not yet used as gold first) and one known negative (an
    image of `image_ids` with a caption that is not its own, nor a pair whose code is in
    the sorted `excluded_codes`), shuffled together."""
    groups = pack_batches(len(candidates), size, rng)
    originals = caption_image.astype(np.int64) * code + caption_ids
    excluded = np.union1d(excluded_codes, originals)
    negatives = draw_negatives(len(groups), image_ids, caption_ids, excluded, code, rng)
    fresh = np.array([p for p in true_captions.tolist()
                      if int(caption_ids[p]) not in gold_captions], dtype=np.int64)
    pool = fresh if len(fresh) >= len(groups) else true_captions
    chosen = rng.choice(pool, size=len(groups), replace=len(pool) < len(groups))
    plan = []
    for number, group in enumerate(groups):
        members = [(int(i), int(c), None) for i, c in candidates[group].tolist()]
        members.append((int(caption_image[chosen[number]]), int(caption_ids[chosen[number]]),
                        "positive"))
        members.append((int(negatives[number, 0]), int(negatives[number, 1]), "negative"))
        plan.append([members[j] for j in rng.permutation(len(members)).tolist()])
    return plan

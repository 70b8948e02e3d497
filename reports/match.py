"""Match verification where storage and metrics meet: models' proposals from score files
(or the project's CLIP scorer), batches with gold items, quality control, aggregation into
positive sets, the paper's Table 2 and model-bias analyses, and the eccv-caption files."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from metrics.retrieval.match import (
    DIRECTIONS,
    QUALITY_COLUMNS,
    ScoreFile,
    aggregate_votes,
    check_batch_size,
    model_bias,
    model_overlap,
    near_pair_codes,
    plan_batches,
    positive_set_quality,
    proposals,
    quality_tables,
    top_k_columns,
    top_k_rows,
    verifier_agreement,
)
from metrics.retrieval.positives import (
    PositiveSet as IdPositiveSet,
)
from metrics.retrieval.positives import (
    normalize_id,
    positive_set,
    read_positive_dir,
    shipped_positive_set,
    shown,
    write_positive_dir,
)
from metrics.signature import format_signature
from reports.numbers import is_missing
from rubrics import printable
from rubrics.match import DEFAULT_RULE
from storage.match import (
    ORIGINAL,
    PAIR_CODE,
    BatchInputs,
    BatchPlan,
    Collection,
    MatchError,
    PositiveCounts,
    PositiveMaps,
    ProposalSummary,
    TopLists,
    check_new_model,
    check_set_name,
    collection,
    create_batches,
    load_positive_set,
    model_settings,
    model_top_lists,
    pair_maps,
    positive_set_names,
    proposal_frame,
    query_sample,
    record_proposals,
    store_positive_set,
    verification_frame,
)

SHIPPED_SETS = {"eccv": "eccv", "cxc": "cxc", "coco": "coco-5k"}


# -- proposals ------------------------------------------------------------------------------

def scores_digest(path: Path) -> str:
    """A short digest of a scores file, or of a folder's ranked-list files."""
    from metrics.signature import digest
    from metrics.untrusted import regular_file
    from storage.retrieval import file_digest

    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [
        regular_file(path, MatchError)]  # a FIFO would block the hashing forever
    return digest([file_digest([(f.name, f) for f in files])], length=12)


def _positions(keys: list[str], index: dict[str, int], what: str, path: Path) -> np.ndarray:
    """Project positions of a file's ids; every project item exactly once."""
    positions = np.empty(len(keys), dtype=np.int64)
    seen: set[str] = set()
    for number, key in enumerate(keys):
        if key in seen:
            raise MatchError(f"{path}: {what} id {key!r} appears twice")
        seen.add(key)
        if key not in index:
            raise MatchError(f"{path}: {what} id {key!r} is not {what} of the project")
        positions[number] = index[key]
    if len(keys) != len(index):
        missing = next(k for k in index if k not in seen)
        raise MatchError(f"{path}: {len(index) - len(keys)} {what}s of the project have no "
                         f"scores, e.g. {missing!r} (the matrix must cover every image and "
                         "caption)")
    return positions


def sample_positions(total: int, sample: int | None, seed: int) -> np.ndarray | None:
    """Sorted positions of a seeded sample of `sample` queries; None for all of them."""
    if sample is None or sample >= total:
        return None
    if sample < 1:
        raise MatchError(f"--queries-sample must be at least 1, not {sample}")
    return np.sort(np.random.default_rng(seed).choice(total, size=sample, replace=False))


def top_lists_from_matrix(source: ScoreFile, items: Collection, path: Path, *,
                          directions: tuple[str, ...], depth: int,
                          sample: int | None, seed: int) -> TopLists:
    """Each query's top `depth` items in every direction asked, as database ids."""
    rows = _positions(source.image_keys, items.image_index(), "image", path)
    columns = _positions(source.caption_keys, items.caption_index(), "caption", path)
    image_of_row, caption_of_column = items.image_ids[rows], items.caption_ids[columns]
    lists: TopLists = {}
    try:
        if "i2t" in directions:
            chosen = sample_positions(len(rows), sample, seed)
            queries = np.arange(len(rows)) if chosen is None else chosen
            best = top_k_rows(source.scores, depth, chosen)
            lists["i2t"] = (image_of_row[queries], caption_of_column[best])
        if "t2i" in directions:
            chosen = sample_positions(len(columns), sample, seed)
            queries = np.arange(len(columns)) if chosen is None else chosen
            best = top_k_columns(source.scores, depth, chosen)
            lists["t2i"] = (caption_of_column[queries], image_of_row[best])
    except ValueError as exc:
        raise MatchError(f"{path}: {exc}") from None
    return lists


def read_ranked_lists(path: Path, items: Collection) -> TopLists:
    """Ranked lists in the eccv-caption layout (query id -> item ids, best first), read by
    `metrics.retrieval.rankings`: a `*_image_to_caption.json` (i2t), a `*_caption_to_image.json`
    (t2i), or a folder with one of each. Every query and item must be the project's; each
    list is kept to the length of the shortest."""
    from metrics.retrieval.positives import CAPTION_TO_IMAGE, IMAGE_TO_CAPTION
    from metrics.retrieval.rankings import read_rankings_json

    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    lists: TopLists = {}
    for file in files:
        direction = ("i2t" if file.name.endswith(IMAGE_TO_CAPTION) else
                     "t2i" if file.name.endswith(CAPTION_TO_IMAGE) else None)
        if direction is None:
            raise MatchError(f"{file}: a ranked-list file is named *{IMAGE_TO_CAPTION} or "
                             f"*{CAPTION_TO_IMAGE}")
        if direction in lists:
            raise MatchError(f"{path}: more than one {direction} ranked-list file")
        ranked = read_rankings_json(file)
        queries, targets = ((items.image_index(), items.caption_index()) if direction == "i2t"
                            else (items.caption_index(), items.image_index()))
        query_ids, item_ids = ((items.image_ids, items.caption_ids) if direction == "i2t"
                               else (items.caption_ids, items.image_ids))
        kind = "image" if direction == "i2t" else "caption"
        for what, ids, known in (("query", ranked.queries, queries),
                                 ("item", ranked.items, targets)):
            unknown = next((i for i in ids if str(i) not in known), None)
            if unknown is not None:
                raise MatchError(f"{file}: {what} {unknown!r} is not in the project"
                                 + (f" ({kind}s query here)" if what == "query" else ""))
        depth = int((ranked.order >= 0).sum(axis=1).min())
        item_rows = np.array([targets[str(i)] for i in ranked.items])[ranked.order[:, :depth]]
        query_rows = np.array([queries[str(q)] for q in ranked.queries])
        lists[direction] = (query_ids[query_rows], item_ids[item_rows])
    if not lists:
        raise MatchError(f"{path}: no ranked-list files")
    return lists


def proposal_signature(digest: str, *, source: str, top_k: int, depth: int, direction: str,
                       sample: int | None, seed: int) -> str:
    return format_signature("match-proposals", {
        "source": source, "digest": digest, "top-k": str(top_k), "depth": str(depth),
        "direction": direction,
        "queries": "all" if sample is None else f"sample({sample},seed:{seed})"})


def check_can_propose(engine: Engine, model: str, sample: int | None, seed: int) -> None:
    """Before any scoring: the model name is usable text (stored and shown: the import's
    check) and new, and every model proposes for the same queries (a sample must repeat
    the first model's)."""
    from rubrics.escape import name_refusal

    if (problem := name_refusal(model)) is not None:
        raise MatchError(f"the model name {shown(model)}: {problem}")
    check_new_model(engine, model)
    first = query_sample(engine)
    if first is None:
        return
    first_sample, first_seed, name = first
    if (first_sample, first_seed if first_sample is not None else None) != (
            sample, seed if sample is not None else None):
        settings = ("all queries" if first_sample is None
                    else f"--queries-sample {first_sample} --seed {first_seed}")
        raise MatchError(f"model {name!r} proposed for {settings}; every model must use the "
                         "same queries")


def propose(engine: Engine, lists: TopLists, *, model: str, signature: str, direction: str,
            top_k: int, sample: int | None, seed: int, actor: str) -> ProposalSummary:
    """Store a model's ranked lists and its top-k candidates, known positives left out."""
    items = collection(engine)
    own_image = dict(zip(items.caption_ids.tolist(), items.caption_image.tolist(),
                         strict=True))
    depth = min(ranked.shape[1] for _, ranked in lists.values())
    if depth < top_k:
        raise MatchError(f"the ranked lists hold {depth} items per query, fewer than "
                         f"--top-k {top_k}")
    return record_proposals(engine, model=model, signature=signature, direction=direction,
                            top_k=top_k, depth=depth, top_lists=lists,
                            candidates=proposals(lists, top_k, own_image),
                            sample=sample, seed=seed if sample is not None else None,
                            actor=actor)


def clip_scores(engine: Engine, clip_model: str, device: str, batch_size: int) -> ScoreFile:
    """The project's images x captions cosine similarities under a CLIP model, each image
    and caption embedded once (GPU when present)."""
    from metrics.models.clip import PREFIX, ClipEmbedder
    from storage.match import caption_texts

    paths, texts = caption_texts(engine)
    items = collection(engine)
    missing = [key for key, path in zip(items.image_keys, paths, strict=True)
               if not path or not Path(path).is_file()]
    if missing:
        raise MatchError(f"--scorer clip needs every image file; {len(missing)} not found, "
                         f"e.g. {missing[0]!r}")
    clip = ClipEmbedder(clip_model, device, batch_size)
    images = clip.images(paths)  # type: ignore[arg-type]
    captions = clip.texts([PREFIX + text for text in texts])
    return ScoreFile((images @ captions.T).astype(np.float32), items.image_keys,
                     items.caption_keys)


# -- batches --------------------------------------------------------------------------------

DEFAULT_NEGATIVES_BEYOND = 25  # gold negatives: pairs no model ranks in its top 25


def make_batches(engine: Engine, *, size: int, redundancy: int, seed: int,
                 negatives_beyond: int | None, actor: str, gold_systems: tuple[str, ...] = (),
                 notice: Callable[[str], None] | None = None) -> BatchPlan:
    """Pack the candidates into batches, each with a known positive (a caption known to be
    true of its image: one that repeats a reference, or of a system in `gold_systems`) and
    a known negative (a pair no model ranks in its top `negatives_beyond`).
    `negatives_beyond` None: the default (25), or the largest value below it that the
    models' ranked lists allow and that leaves enough known negatives (`notice` is told
    which). A value given that cannot work is refused with the one to use."""
    check_batch_size(size)
    # logged with the --negatives-beyond value the planner used
    settings: dict[str, object] = {"size": size, "gold_systems": list(gold_systems)}
    notes: list[str] = []

    def planner(inputs: BatchInputs) -> BatchPlan:
        items = inputs.collection

        def attempt(beyond: int) -> BatchPlan:
            excluded = np.union1d(near_pair_codes([lists for _, _, lists in inputs.models],
                                                  beyond, PAIR_CODE), inputs.used_codes)
            return plan_batches(inputs.candidates, image_ids=inputs.usable_images,
                                caption_ids=items.caption_ids,
                                caption_image=items.caption_image, excluded_codes=excluded,
                                true_captions=inputs.true_captions,
                                gold_captions=inputs.gold_captions, size=size,
                                rng=np.random.default_rng(seed), code=PAIR_CODE)

        def largest_working(top: int) -> tuple[int, BatchPlan] | None:
            for beyond in range(top, 0, -1):
                try:
                    return beyond, attempt(beyond)
                except ValueError:
                    continue
            return None

        depth, name = min((depth, name) for name, depth, _ in inputs.models)
        wanted = DEFAULT_NEGATIVES_BEYOND if negatives_beyond is None else negatives_beyond
        try:
            if wanted > depth:
                raise ValueError(f"model {name!r} kept its ranked lists to depth {depth}")
            plan, beyond = attempt(wanted), wanted
        except ValueError as exc:
            found = largest_working(min(wanted - 1, depth))
            if found is None:
                raise MatchError(f"{exc}; no --negatives-beyond leaves enough known "
                                 "negatives (propose with more models' lists or a larger "
                                 "--depth, or add images)") from None
            beyond, plan = found
            if negatives_beyond is not None:
                raise MatchError(f"{exc}; use --negatives-beyond {beyond} or less") from None
            notes[:] = [f"--negatives-beyond {beyond} (not the default "
                        f"{DEFAULT_NEGATIVES_BEYOND}): {exc}" + (
                            "" if beyond == depth else
                            f"; at {depth}, too few known negatives are left")]
        settings["negatives_beyond"] = beyond
        if (known := len(inputs.true_captions)) < len(plan):
            notes.append(f"only {known} caption{'' if known == 1 else 's'} known to be true "
                         f"of {'its' if known == 1 else 'their'} image for {len(plan)} "
                         "batches: known positives are reused (name a trusted system with "
                         "--gold-system for more)")
        return plan

    plan = create_batches(engine, planner, redundancy=redundancy, seed=seed,
                          gold_systems=gold_systems, actor=actor, settings=settings)
    for note in notes if notice is not None else ():
        notice(note)
    return plan


# -- quality control ------------------------------------------------------------------------

def quality_control(engine: Engine, rushed_seconds: float
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per annotator, per claimed batch) gold accuracy, time per pair, rushed pairs. A gold
    item on an image flagged as broken checks nothing: its answer counts as a plain pair."""
    answers = verification_frame(engine)
    answers.loc[answers["image_flagged"], "gold"] = None
    return quality_tables(answers, rushed_seconds)


# -- aggregation ----------------------------------------------------------------------------

def verdicts(engine: Engine, rule: str, min_votes: int, *, gold: bool = False
             ) -> pd.DataFrame:
    """Per verified pair (rejected claims do not vote; gold items only with `gold`): image
    and caption keys, votes, positive votes, image_flagged, verdict. A pair whose image
    someone flagged as broken stays undecided, whatever its votes: no one could see it."""
    answers = verification_frame(engine)
    votes = answers[answers["status"] == "active"]
    if not gold:
        votes = votes[votes["gold"].isna()]
    table = aggregate_votes(votes[["image_key", "caption_key", "answer"]].rename(
        columns={"image_key": "image", "caption_key": "caption"}), rule, min_votes)
    flagged = set(votes.loc[votes["image_flagged"], "image_key"])
    table.insert(len(table.columns) - 1, "image_flagged", table["image"].isin(flagged))
    table["verdict"] = table["verdict"].where(~table["image_flagged"])
    return table


def _pairs_frame(maps: PositiveMaps) -> pd.DataFrame:
    rows = [(d, q, i) if d == "i2t" else (d, i, q)
            for d in DIRECTIONS for q, found in maps[d].items() for i in found]
    return pd.DataFrame(rows, columns=["direction", "image", "caption"])


@dataclass(frozen=True)
class PositivesResult:
    name: str
    rule: str
    min_votes: int
    decided: int
    positives: int
    ties: int  # undecided: split evenly (no majority either way)
    too_few_votes: int  # undecided: fewer than min_votes answers
    on_flagged_images: int  # undecided: the image is flagged as broken
    stored: PositiveCounts  # the set NAME: verified and original positives (and merged)
    quality: pd.DataFrame  # Table 2 (per-query and pooled): one row per set and direction
    agreement: pd.DataFrame

    @property
    def undecided(self) -> int:
        return self.ties + self.too_few_votes + self.on_flagged_images


def derive_positives(engine: Engine, *, name: str, rule: str = DEFAULT_RULE,
                     min_votes: int = 1, merge: tuple[str, ...] = (), actor: str,
                     bootstrap: int = 1000, ci: float = 0.90, seed: int = 0,
                     replace: bool = False) -> PositivesResult:
    """The human-verified positives (stored as NAME-human) and, merged with the original
    positives and the sets in `merge`, the new positive set NAME; with the precision and
    recall of every existing set against the verified pairs (ECCV Caption Table 2) and the
    agreement of redundant verifiers. A stored set NAME or NAME-human (an imported one
    too) is replaced only with `replace`."""
    check_set_name(name)
    if name == ORIGINAL or name.endswith("-human"):
        raise MatchError(f"choose another name than {name!r}")
    taken = [n for n in (name, f"{name}-human") if n in positive_set_names(engine)]
    if taken and not replace:
        raise MatchError(f"a positive set named {taken[0]!r} exists already; give --replace "
                         "to replace it, or another --name")
    table = verdicts(engine, rule, min_votes)
    positive = table[table["verdict"].eq(True)]
    human = pair_maps(zip(positive["image"], positive["caption"], strict=True))
    merged: PositiveMaps = {d: {q: list(v) for q, v in m.items()}
                            for d, m in load_positive_set(engine, ORIGINAL).items()}
    for extra in (human, *(load_positive_set(engine, other) for other in merge)):
        for direction in DIRECTIONS:
            for query, found in extra[direction].items():
                merged[direction].setdefault(query, [])
                merged[direction][query] += [i for i in found
                                             if i not in merged[direction][query]]
    settings = f"rule:{rule}|min-votes:{min_votes}"
    source = f"verified|{settings}|merged:{'+'.join((ORIGINAL, *merge))}"
    store_positive_set(engine, f"{name}-human", human, source=f"verified|{settings}",
                       actor=actor, replace=replace)
    stored = store_positive_set(engine, name, merged, source=source, actor=actor,
                                replace=replace)
    # Table 2's h is every pair people were shown and answered, with a verdict or not,
    # gold items too (the known positives are the original set's own pairs: their answers
    # measure its precision); a pair on an image flagged as broken was not seen.
    shown = verdicts(engine, rule, min_votes, gold=True)
    quality = positive_sets_quality(engine, shown[~shown["image_flagged"]],
                                    skip={name, f"{name}-human"})
    answers = verification_frame(engine)
    votes = answers[(answers["status"] == "active") & answers["gold"].isna()
                    & ~answers["image_flagged"]]
    agreement = verifier_agreement(votes[["pair", "annotator", "answer"]], rule=rule,
                                   bootstrap=bootstrap, ci=ci, seed=seed)
    seen = table[~table["image_flagged"]]
    too_few = seen["votes"] < min_votes
    ties = seen["verdict"].isna() & ~too_few  # enough votes, and no majority either way
    return PositivesResult(name, rule, min_votes, int(table["verdict"].notna().sum()),
                           len(positive), int(ties.sum()), int(too_few.sum()),
                           int(table["image_flagged"].sum()), stored, quality, agreement)


def positive_sets_quality(engine: Engine, table: pd.DataFrame, skip: set[str]
                          ) -> pd.DataFrame:
    """ECCV Caption Table 2 of every stored positive set but those in `skip` and the
    `-human` ones, against the verdicts in `table`: positive_set and the columns of
    `metrics.retrieval.match.QUALITY_COLUMNS` (precision and recall as the paper's section 3.3
    defines them, per-query means; pooled_precision and pooled_recall beside them)."""
    frames = []
    for name in positive_set_names(engine):
        if name in skip or name.endswith("-human"):
            continue
        quality = positive_set_quality(_pairs_frame(load_positive_set(engine, name)), table)
        frames.append(quality.assign(positive_set=name))
    if not frames:
        return pd.DataFrame(columns=["positive_set", *QUALITY_COLUMNS])
    result = pd.concat(frames, ignore_index=True)
    return result[["positive_set", *QUALITY_COLUMNS]]


TABLE2_TITLE = (
    "Existing positive sets against the verified pairs: ECCV Caption Table 2 (its\n"
    "section 3.3). Per query: r' = its positives in the set that people were shown\n"
    "(verdict or not: an undecided pair is not a verified positive), t = its verified\n"
    "positives. precision = mean of |r' ∩ t| / |r'| over queries_kept (r' not\n"
    "empty); recall = mean of 1 - |t \\ r'| / |t| over recall_queries (t not empty\n"
    "too; recall_dropped: kept queries without a verified positive).")
POOLED_TITLE = (
    "The same sets pooled over pairs (not the paper's definition): pooled_precision =\n"
    "hits / judged, pooled_recall = hits / verified_positives (the verified positives\n"
    "of the set's queries, judged in the set or not).")


def table2_parts(quality: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(Table 2 as the paper defines it, the pooled figures) for the terminal: each with
    positive_set and direction, the first with the per-query means and their query
    counts, the second with the pair counts and the pooled ratios."""
    keys = ["positive_set", "direction"]
    paper = ["queries", "queries_kept", "precision", "recall_queries", "recall_dropped",
             "recall"]
    pooled = ["size", "judged", "hits", "verified_positives", "pooled_precision",
              "pooled_recall"]
    return quality[keys + paper], quality[keys + pooled]


def bias(engine: Engine, *, rule: str = DEFAULT_RULE, min_votes: int = 1
         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per proposing model: candidates, decided, verified positives; per two models and
    direction: overlap of top k and Kendall tau of their ranked lists)."""
    items = collection(engine)
    image_key = dict(zip(items.image_ids.tolist(), items.image_keys, strict=True))
    caption_key = dict(zip(items.caption_ids.tolist(), items.caption_keys, strict=True))
    proposed = proposal_frame(engine)
    proposed = proposed.assign(image=proposed["image"].map(image_key),
                               caption=proposed["caption"].map(caption_key))
    per_model = model_bias(proposed, verdicts(engine, rule, min_votes))
    settings = {row.model: row.top_k for row in proposed.groupby("model")["rank"].max()
                .rename("top_k").reset_index().itertuples()}
    k = min(settings.values()) if settings else 1
    return per_model, model_overlap(model_top_lists(engine), k)


# -- files ----------------------------------------------------------------------------------

def import_positives(engine: Engine, name: str, directory: Path | None, *, actor: str
                     ) -> tuple[str, PositiveCounts]:
    """A positive set in the eccv-caption layout from DIR, or (no DIR) `eccv`, `cxc` or
    `coco` as the eccv-caption package ships them. Returns (source, its size)."""
    from metrics.retrieval.positives import PositivesError, eccv_caption_available
    from metrics.signature import package_version

    check_set_name(name)
    try:
        if directory is None:
            if name not in SHIPPED_SETS:
                raise MatchError(f"no folder given and {name!r} is not a shipped set "
                                 f"({', '.join(SHIPPED_SETS)})")
            if not eccv_caption_available():
                raise MatchError("the eccv-caption package is not installed (pip install "
                                 "eccv-caption); it ships the eccv, cxc and coco sets")
            found = shipped_positive_set(SHIPPED_SETS[name])
            source = f"eccv-caption {package_version('eccv-caption')}: {SHIPPED_SETS[name]}"
        else:
            found = read_positive_dir(directory, name)
            source = f"{directory.resolve()}#{scores_digest(directory)}"
    except PositivesError as exc:
        raise MatchError(str(exc)) from None
    images, captions = ({}, {}) if directory is None else _id_renames(directory)
    maps = {"i2t": {images.get(str(q), str(q)): [captions.get(str(i), str(i)) for i in v]
                    for q, v in found.image_to_captions.items()},
            "t2i": {captions.get(str(q), str(q)): [images.get(str(i), str(i)) for i in v]
                    for q, v in found.caption_to_images.items()}}
    return source, store_positive_set(engine, name, maps, source=source, actor=actor)


IDS_SUFFIX = "_ids.json"  # beside an eccv-json export whose keys are not integers


def _id_renames(directory: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The (images, captions) maps from database id back to project key that
    `export_eccv` writes beside a set whose keys are not integers (`PREFIX_ids.json`, the
    prefix of the set's files), or empty maps where there is none. Read as any file we
    import: a malformed one is refused, naming it."""
    from metrics.retrieval.positives import IMAGE_TO_CAPTION, positive_files, shown
    from metrics.untrusted import load_json, regular_file
    from rubrics.escape import text_refusal

    prefix = positive_files(directory)[0].name.removesuffix(IMAGE_TO_CAPTION)
    path = directory / f"{prefix}{IDS_SUFFIX}"
    if not path.exists():
        return {}, {}
    try:
        regular_file(path, MatchError)
        data = load_json(path.read_text(encoding="utf-8"), path, MatchError, flat=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise MatchError(f"{path}: cannot be read: {exc}") from None
    maps = data.values() if isinstance(data, dict) else ()
    if (not isinstance(data, dict) or not set(data) <= {"images", "captions"}
            or not all(isinstance(m, dict) and all(isinstance(v, str) for v in m.values())
                       for m in maps)):
        raise MatchError(f"{path}: expected {{\"images\": {{id: key}}, \"captions\": "
                         "{id: key}}, as `thumb match export` writes it")
    for key in (key for m in maps for key in m.values()):
        if (problem := text_refusal(key)) is not None:
            raise MatchError(f"{path}: the key {shown(key)}: {problem}")
    return data.get("images", {}), data.get("captions", {})


def export_eccv(engine: Engine, name: str, out: Path) -> list[Path]:
    """`out/NAME_image_to_caption.json` and `out/NAME_caption_to_image.json` in the layout
    of eccv-caption's data files (keys: id strings; values: lists of integer ids). Ids
    that are not integers are written as the project's database ids, and
    `out/NAME_ids.json` maps those back to the keys."""
    maps = load_positive_set(engine, name)
    images = {q for q in maps["i2t"]} | {i for v in maps["t2i"].values() for i in v}
    captions = {q for q in maps["t2i"]} | {i for v in maps["i2t"].values() for i in v}
    items = collection(engine)
    image_ids = _integer_ids(images, dict(zip(items.image_keys, items.image_ids.tolist(),
                                              strict=True)), "image", name)
    caption_ids = _integer_ids(captions, dict(zip(items.caption_keys,
                                                  items.caption_ids.tolist(), strict=True)),
                               "caption", name)
    exported = positive_set(
        name,
        {image_ids[q]: [caption_ids[i] for i in v] for q, v in maps["i2t"].items()},
        {caption_ids[q]: [image_ids[i] for i in v] for q, v in maps["t2i"].items()})
    write_positive_dir(exported, out, prefix=name)
    written = [out / f"{name}_image_to_caption.json", out / f"{name}_caption_to_image.json"]
    renamed = {kind: {str(v): k for k, v in ids.items() if str(v) != k}
               for kind, ids in (("images", image_ids), ("captions", caption_ids))}
    if any(renamed.values()):
        written.append(out / f"{name}_ids.json")
        written[-1].write_text(json.dumps(renamed, indent=1, sort_keys=True),
                               encoding="utf-8")
    return written


def _integer_ids(keys: set[str], database_ids: dict[str, int], kind: str, name: str
                 ) -> dict[str, int]:
    """Each key as an integer id: itself when every key is an integer, else its database
    id (all keys must then be the project's)."""
    normal = {key: normalize_id(key) for key in keys}
    if all(isinstance(v, int) for v in normal.values()):
        return normal  # type: ignore[return-value]
    outside = next((k for k in sorted(keys) if k not in database_ids), None)
    if outside is not None:
        raise MatchError(f"positive set {name!r} mixes integer ids and project keys, and "
                         f"{kind} id {outside!r} is not in the project: eccv-json needs "
                         "integer ids")
    return {key: database_ids[key] for key in keys}


def export_verifications(engine: Engine, out: Path, fmt: str | None = None, *,
                         raw: bool = False) -> int:
    """Every answer (pair, annotator, answer, seconds, answered_at in ISO 8601 with its
    time zone, proposing models and ranks, gold, image_flagged) to CSV or Parquet: `fmt`,
    or by the suffix of `out`. CSV text cells are escaped for spreadsheets unless `raw`."""
    from storage.exporter import iso_times

    frame = verification_frame(engine).drop(columns=["pair", "claim"])
    frame = frame.rename(columns={"image": "image_db_id", "caption": "caption_db_id",
                                  "models": "proposed_by"})
    frame["answered_at"] = iso_times(frame["answered_at"])
    fmt = fmt or out.suffix.lower().lstrip(".")
    if fmt == "parquet":
        frame.to_parquet(out, index=False)
    elif fmt == "csv":
        from storage.exporter import write_frame

        write_frame(frame, out, "csv", raw=raw)
    else:
        raise MatchError(f"{out}: verifications export to .csv or .parquet")
    return len(frame)


def id_positive_set(engine: Engine, name: str) -> IdPositiveSet:
    """A stored positive set as metrics.retrieval.positives sees one (for retrieval evaluation)."""
    maps = load_positive_set(engine, name)
    return positive_set(name, maps["i2t"], maps["t2i"])


def clip_digest(clip_model: str) -> str:
    """What identifies CLIP proposals: the model's label (its folder's name for a path)."""
    from metrics.models.torch_device import model_label

    return model_label(clip_model)


MISSING = "-"  # a value a match table does not have (undefined: no query to average)
NOTE_COLUMNS = 30  # the width a text column after the row's names wraps at in the terminal


def frame_text(frame: pd.DataFrame) -> str:
    """A table for the terminal; stored text (names) shown with control bytes escaped.
    Wider than 80 columns, it is split into tables of fewer columns, each repeating the
    leading text columns that name a row (`reports.terminal.fitted`)."""
    from tabulate import tabulate

    from reports.terminal import fitted

    if frame.empty:
        return "(none)"
    shown = frame.map(lambda v: printable(v, newlines=False) if isinstance(v, str) else v)
    text = [pd.api.types.infer_dtype(frame[column], skipna=True) == "string"
            for column in frame.columns]
    keys = max(1, text.index(False) if False in text else len(text))
    wrapped = {column for column, is_text in zip(frame.columns[keys:], text[keys:],
                                                  strict=True) if is_text}

    def table(columns: list[str]) -> str:  # a note wraps in its column: NOTE_COLUMNS wide
        widths = [NOTE_COLUMNS if column in wrapped else None for column in columns]
        # None, not nan, where a value is missing: tabulate writes it as MISSING and still
        # formats the column's numbers (a "-" string would make them text, unrounded)
        rows = [[None if is_missing(value) else value for value in row]
                for row in shown[columns].itertuples(index=False, name=None)]
        return tabulate(rows, headers=columns, floatfmt=".3f", missingval=MISSING,
                        maxcolwidths=widths)

    return "\n\n".join(fitted(list(frame.columns), table, keys=keys))


def match_status(engine: Engine) -> str:
    """Models, batches, answers and positive sets in a few lines."""
    from storage.match import match_counts, positive_set_sources

    counts = match_counts(engine)
    lines = [f"models: {counts['models']}  pairs: {counts['pairs']}  "
             f"batches: {counts['batches']}  claims: {counts['claims']} "
             f"({counts['rejected']} rejected)  answers: {counts['answers']} of "
             f"{counts['needed']} needed"]
    settings = model_settings(engine)
    for row in settings.itertuples():
        lines.append(f"  {printable(row.model, newlines=False)}: {row.signature}")
    lines.append("positive sets:")
    for name, source in positive_set_sources(engine).items():
        lines.append(f"  {printable(name, newlines=False)}: {printable(source, newlines=False)}")
    return "\n".join(lines)

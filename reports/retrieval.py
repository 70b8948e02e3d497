"""Retrieval evaluation over a project: resolve positive sets (shipped, project, files),
read a model's rankings once, compute what is not stored yet, store it per positive set
under its signature, and read back tidy records."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Engine

from metrics.retrieval.evaluation import (
    DEFAULT_KS,
    DEFAULT_NCS_AVERAGING,
    PMRP_CAP,
    MissingLists,
    SemanticInput,
    SetSamples,
    evaluation_sets,
    ncs_averaging_name,
    ncs_label_suffix,
    summarize_sets,
)
from metrics.retrieval.positives import (
    SHIPPED_NAMES,
    Id,
    IdMap,
    PositiveSet,
    normalize_id,
    positive_files,
    positive_set,
    read_positive_dir,
    shipped_positive_set,
    shipped_positive_sets,
    shown,
)
from metrics.retrieval.rankings import (
    Ranked,
    RankingsError,
    check_known,
    read_rankings_json,
    read_scores,
    scored_directions,
)
from metrics.signature import digest, format_signature, package_version
from metrics.stats.confidence import CI_METHOD, few_units
from storage.retrieval import (
    check_model_files,
    file_digest,
    find_model,
    project_captions,
    project_references,
    results_frame,
    save_evaluation,
    stored_results,
)

if TYPE_CHECKING:  # pandas, scipy and the relevance code load only where used
    import pandas as pd

    from metrics.retrieval.relevance import RelevanceMatrix

PROJECT = "project"
KINDS = ("image", "caption")  # what the queries and items of i2t rankings are


@dataclass(frozen=True)
class ModelFiles:
    """Where a model's results are: two ranked-list files, or one score matrix."""

    i2t: Path | None = None
    t2i: Path | None = None
    scores: Path | None = None

    def labelled(self) -> list[tuple[str, Path]]:
        if self.scores is not None:
            return [("scores", self.scores)]
        return [("i2t", self.i2t), ("t2i", self.t2i)]

    @property
    def source(self) -> str:
        return "scores" if self.scores is not None else "rankings"

    def where(self, direction: str) -> tuple[str, Callable[[], str] | None]:
        """The file that holds `direction`'s rankings, and how to read its text (to name
        a line; None for a score matrix), for `metrics.retrieval.rankings.check_known`."""
        if self.scores is not None:
            return str(self.scores), None
        path = self.i2t if direction == "i2t" else self.t2i
        return str(path), lambda: path.read_text(encoding="utf-8")

    def read(self) -> dict[str, Ranked]:
        if self.scores is not None:
            return dict(scored_directions(*read_scores(self.scores)))
        return {"i2t": read_rankings_json(self.i2t), "t2i": read_rankings_json(self.t2i)}


@dataclass(frozen=True, eq=False)
class Universe:
    """Every image and caption a set's rankings may name (a shipped set's COCO 5K test
    split, the project), each caption with its own image (`caption_images`: what
    plausible matches are derived over), and `content`, a digest of all of it."""

    images: frozenset[Id]
    captions: frozenset[Id]
    caption_images: IdMap
    content: str


@dataclass(frozen=True, eq=False)
class Target:
    """One thing to evaluate against: a positive set (its folds), a plausible-match set,
    or a relevance matrix; its signature says exactly which and with what settings."""

    kind: str  # positives | plausible | semantic
    label: str
    content: str  # digest of what the set or matrix holds
    folds: tuple[PositiveSet, ...] = ()
    relevance: RelevanceMatrix | None = None
    universe: Universe | None = None

    def known_ids(self) -> tuple[frozenset, frozenset]:
        """(images, captions) this target can say something about: a matrix's rows and
        columns, the universe of a set that has one (a shipped set's COCO split, the
        project), else every id its folds name."""
        if self.relevance is not None:
            return frozenset(self.relevance.images), frozenset(self.relevance.captions)
        if self.universe is not None:
            return self.universe.images, self.universe.captions
        images = {i for fold in self.folds for i in fold.image_to_captions}
        images.update(i for fold in self.folds for items in fold.caption_to_images.values()
                      for i in items)
        captions = {c for fold in self.folds for c in fold.caption_to_images}
        captions.update(c for fold in self.folds for items in fold.image_to_captions.values()
                        for c in items)
        return frozenset(images), frozenset(captions)


def resolve_positives(engine: Engine | None, names: Sequence[str]) -> list[Target]:
    """`eccv`, `cxc`, `coco-5k`, `coco-1k` (the eccv-caption package), `project` (each
    caption with its image), a positive set stored by `thumb match`, or a directory in
    the eccv-caption layout."""
    targets = []
    for name in dict.fromkeys(names):
        if name in SHIPPED_NAMES:
            targets.append(Target("positives", name, _shipped_content(name),
                                  shipped_positive_sets(name), universe=_coco_universe()))
        elif (stored := _stored_target(engine, name)) is not None:
            targets.append(stored)
        else:
            path = Path(name)
            positives = read_positive_dir(path)
            content = file_digest([(f.name, f) for f in positive_files(path)])[:80]
            targets.append(Target("positives", positives.name, digest([content]),
                                  (positives,)))
    return targets


def _shipped_content(name: str) -> str:
    """What a shipped set holds: the set's name and the eccv-caption release it comes from
    (the two fix its files), so that no two shipped sets share a content digest."""
    return f"{name}:eccv-caption=={package_version('eccv-caption')}"


@cache
def _coco_universe() -> Universe:
    """The COCO 5K test split, each caption with its own image: the ids shipped sets
    know."""
    coco = shipped_positive_set("coco-5k")
    return Universe(frozenset(coco.image_to_captions), frozenset(coco.caption_to_images),
                    coco.caption_to_images, _shipped_content("coco-5k"))


def _stored_target(engine: Engine | None, name: str) -> Target | None:
    """`project` or a positive set stored by `thumb match`; None for any other name."""
    from storage.match import ORIGINAL, load_positive_set, positive_set_names

    if engine is None or (name != PROJECT and name not in positive_set_names(engine)):
        return None
    everything = load_positive_set(engine, ORIGINAL)
    original = positive_set(PROJECT, everything["i2t"], everything["t2i"])
    universe = Universe(frozenset(original.image_to_captions),
                        frozenset(original.caption_to_images), original.caption_to_images,
                        _maps_digest(everything))
    if name == PROJECT:
        return Target("positives", name, universe.content, (original,), universe=universe)
    maps = load_positive_set(engine, name)
    own = positive_set(name, maps["i2t"], maps["t2i"])
    return Target("positives", name, _maps_digest(maps), (own,), universe=universe)


def _maps_digest(maps: Mapping[str, Mapping[object, Iterable[object]]]) -> str:
    """A digest of a stored positive set's pairs ({direction: {query: [items]}})."""
    return digest(sorted(f"{d}\t{q}\t{i}" for d, lists in maps.items()
                         for q, items in lists.items() for i in items))


def resolve_plausible(directory: Path | None, instances: Path | None = None,
                      zetas: Sequence[int] = (), positives: Sequence[Target] = ()
                      ) -> list[Target]:
    """The plausible matches of `--pm DIR` and those derived from a COCO instances file
    for each ζ (`derived_plausible`)."""
    targets = []
    if directory is not None:
        plausible = read_positive_dir(directory, name="pm")
        files = file_digest([(f.name, f) for f in positive_files(directory)])
        targets.append(Target("plausible", "pm", digest([files]), (plausible,)))
    if instances is not None:
        targets += derived_plausible(instances, zetas, positives)
    return targets


def derived_plausible(instances: Path, zetas: Sequence[int], positives: Sequence[Target]
                      ) -> list[Target]:
    """ECCV Caption's plausible matches (`pm-zetaN`) from a COCO instances file, derived
    over every caption the rankings may hold, each with its own image: the universe of
    the positive sets (all 25,000 captions of the COCO 5K test split for any shipped
    set, every caption of the project for `project` or a set stored by `thumb match`),
    or, where no set has one, the captions of the sets' directories (each with its first
    image). Which of the sets name that universe, and in which order, changes nothing;
    the content digest is the instances file's and the universe's."""
    from metrics.retrieval.positives import plausible_matches, read_coco_presence

    sources = [t for t in positives if t.kind == "positives"]
    universes = [t.universe for t in sources if t.universe is not None] or [
        Universe(*t.known_ids(), t.folds[0].caption_to_images, t.content) for t in sources]
    if not universes:
        raise ValueError("--pm-from needs a --positives set: its images and captions (the "
                         "COCO 5K test split for eccv, cxc, coco-5k and coco-1k) are what "
                         "the plausible matches are derived over")
    distinct = dict(sorted({u.content: u for u in universes}.items()))
    presence = read_coco_presence(instances)
    caption_images = _caption_images(list(distinct.values()))
    content = digest([file_digest([("instances", instances)]), *distinct])
    return [Target("plausible", f"pm-zeta{zeta}", content,
                   (plausible_matches(presence, caption_images, zeta, name=f"pm-zeta{zeta}"),))
            for zeta in zetas]


def _caption_images(universes: Sequence[Universe]) -> IdMap:
    """Each caption of `universes` with its own image; a caption that two of them give
    different images is refused."""
    if len(universes) == 1:
        return universes[0].caption_images
    merged: dict[Id, Id] = {}
    for universe in universes:
        for caption, images in universe.caption_images.items():
            if images and merged.setdefault(caption, images[0]) != images[0]:
                raise ValueError(f"--pm-from: the positive sets give caption {shown(caption)} "
                                 f"two images ({shown(merged[caption])} and "
                                 f"{shown(images[0])}); derive plausible matches for one "
                                 "of them at a time")
    return {caption: (image,) for caption, image in merged.items()}


def resolve_relevance(paths: Sequence[Path]) -> list[Target]:
    targets = []
    for path in paths:
        from metrics.retrieval.relevance import read_relevance

        matrix = read_relevance(path)
        targets.append(Target("semantic", matrix.metric, matrix.signature, relevance=matrix))
    return targets


@dataclass(frozen=True)
class Settings:
    ks: tuple[int, ...] = DEFAULT_KS
    ms: tuple[int, ...] = (1, 2, 3)
    pmrp_cap: int | None = PMRP_CAP
    bootstrap: int = 1000
    ci: float = 0.95
    seed: int = 0
    ncs_averaging: str = DEFAULT_NCS_AVERAGING  # authors (their code) | eq5 | ratio

    def __post_init__(self) -> None:
        # an earlier name (per-query) is stored under the current one (eq5)
        object.__setattr__(self, "ncs_averaging", ncs_averaging_name(self.ncs_averaging))

    def signature(self, target: Target) -> str:
        """`retrieval|positives:…|k:…|…`; a relevance matrix's also names SR's m and the
        NCS averaging (`ncs:authors`, `ncs:eq5` or `ncs:ratio`), so a result stored under
        one averaging is never read back as another."""
        fields = {"positives": f"{target.label}#{digest([target.content])}",
                  "k": ",".join(map(str, self.ks))}
        if target.kind == "plausible":
            fields = {"positives": fields["positives"],
                      "cap": "none" if self.pmrp_cap is None else str(self.pmrp_cap)}
        if target.kind == "semantic":
            fields["m"] = ",".join(map(str, self.ms))
            fields["ncs"] = self.ncs_averaging
        fields.update(bootstrap=str(self.bootstrap), ci=f"{self.ci:g}", interval=CI_METHOD,
                      seed=str(self.seed))
        return format_signature("retrieval", fields)


def evaluate_model(engine: Engine, name: str, files: ModelFiles, targets: Sequence[Target],
                   settings: Settings, *, actor: str, replace: bool = False
                   ) -> tuple[list[dict[str, object]], int]:
    """Evaluate (what is not stored yet) and return (the model's records for these
    targets, the number of targets computed now). Bad files leave the database as it
    was: everything is read and computed before anything is stored. The model's name is
    checked as imported text is (it is stored and shown)."""
    from rubrics.escape import name_refusal

    if (problem := name_refusal(name)) is not None:
        raise ValueError(f"the model name {shown(name)}: {problem}")
    labelled = files.labelled()
    directions = None
    with ThreadPoolExecutor(1) as pool:  # hashlib lets go of the interpreter lock
        hashing = pool.submit(file_digest, labelled)
        if find_model(engine, name) is None:  # a new model: read its files meanwhile
            directions = files.read()
        digest_of_files = hashing.result()
    done = check_model_files(engine, name, digest_of_files, replace)
    signatures = {target: settings.signature(target) for target in targets}
    todo = [t for t in targets if signatures[t] not in done]
    if todo:
        directions = directions or files.read()
        for target in todo:
            if target.universe is not None:
                images, captions = target.universe.images, target.universe.captions
                for direction, known, kinds in (("i2t", (images, captions), KINDS),
                                                ("t2i", (captions, images), KINDS[::-1])):
                    source, text = files.where(direction)
                    check_known(directions[direction], *known, source, text=text,
                                kinds=kinds, known_as=target.label)
        try:
            computed = _compute(directions, todo, settings)
        except MissingLists as error:
            raise RankingsError(f"{files.where(error.direction)[0]}: {error}") from None
        results = {signatures[target]: records
                   for target, records in zip(todo, computed, strict=True)}
        save_evaluation(engine, name, source=files.source, digest=digest_of_files,
                        files=" ".join(str(p) for _, p in labelled), results=results,
                        actor=actor)
    stored = stored_results(engine, [name], list(signatures.values()))
    return tidy(stored), len(todo)


def _compute(directions: dict[str, Ranked], targets: Sequence[Target], settings: Settings
             ) -> list[list[dict[str, object]]]:
    """Each target's records, from one resampling of them all: targets over the same
    queries share their draws (`metrics.retrieval.evaluation.set_replicates`)."""
    groups = [_target_sets(directions, target, settings) for target in targets]
    records = iter(summarize_sets([one for group in groups for one in group],
                                  bootstrap=settings.bootstrap, ci=settings.ci,
                                  seed=settings.seed))
    return [[record for _ in group for record in next(records)] for group in groups]


def _target_sets(directions: dict[str, Ranked], target: Target, settings: Settings
                 ) -> list[SetSamples]:
    common = {"ks": settings.ks, "ms": settings.ms}
    if target.kind == "positives":
        return evaluation_sets(directions, positive_sets=[(target.label, target.folds)],
                               **common)
    if target.kind == "plausible":
        return evaluation_sets(directions, plausible=target.folds,
                               pmrp_cap=settings.pmrp_cap, **common)
    relevance = target.relevance
    semantic = SemanticInput(relevance.metric, relevance.views(), relevance.truth())
    return evaluation_sets(directions, semantic=[semantic],
                           ncs_averaging=settings.ncs_averaging, **common)


def retrieval_table(engine: Engine) -> pd.DataFrame:
    """Every stored retrieval result (latest per model, signature and metric) as a tidy
    frame for `thumb report`; empty when no model was evaluated."""
    import pandas as pd

    frame = pd.DataFrame(tidy(stored_results(engine)))
    # k and m are counts: nullable integers, so that JSON writes 5, not 5.0
    return frame.astype({"k": "Int64", "m": "Int64"}) if len(frame) else frame


def tidy(rows: Iterable[Mapping[str, object]]) -> list[dict[str, object]]:
    """JSON-ready records {model, positives, metric, direction, k, m, value, ci_low,
    ci_high, n, signature, ci_warning} of stored results (`ci_warning`: a CI over fewer
    than 10 queries; the signature's `interval` names the kind of CI)."""
    return [{"model": row["model"], "positives": row["positives"], "metric": row["metric"],
             "direction": row["direction"], "k": _integer(row["k"]), "m": _integer(row["m"]),
             "value": _number(row["value"]), "ci_low": _number(row["ci_low"]),
             "ci_high": _number(row["ci_high"]), "n": int(row["n"]),
             "signature": row["signature"],
             "ci_warning": None if _number(row["ci_low"]) is None
             else few_units(int(row["n"]), "queries")} for row in rows]


def _integer(value: object) -> int | None:
    return None if value is None else int(value)


def _number(value: object) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


# --- relevance matrices ----------------------------------------------------------------

def project_relevance(engine: Engine, metric: str, target: Path, *, tokenizer: str = "auto",
                      progress: Callable[[int, int], None] | None = None,
                      replace: bool = True, write_to: Path | None = None
                      ) -> tuple[RelevanceMatrix, bool]:
    """The project's relevance matrix under `metric`, written to `target` (or to
    `write_to`, a temporary file that the caller moves to `target`); (matrix, True) when
    built now, (matrix, False) when `target` already held the same signature. Without
    `replace`, a `target` that holds anything else is refused before any work."""
    from metrics.retrieval.relevance import (
        RelevanceError,
        RelevanceMatrix,
        cider_d_all_pairs,
        pairwise_relevance,
        read_relevance,
        write_relevance,
    )
    from metrics.text.tokenize import resolve_tokenizer, tokenize

    captions = project_captions(engine)
    references = project_references(engine)
    bare = [image for image, refs in references.items() if not refs]
    if bare:
        raise ValueError(f"{len(bare)} image(s) have no references (e.g. {bare[0]!r}); "
                         "relevance scores captions against each image's references")
    if captions.empty:
        raise ValueError("the project has no captions")
    images = list(references)
    texts = captions["text"].tolist()
    data = digest([*images, *(f"{k}\t{t}" for k, t in zip(captions["caption_key"], texts,
                                                          strict=True)),
                   *("\t".join(refs) for refs in references.values())])
    if metric == "cider-d":
        backend = resolve_tokenizer(tokenizer)
        fields = {"impl": "thumb-tui-sparse-all-pairs", "n": "4", "sigma": "6",
                  "df": "images", "tok": backend}
    else:
        fields = {"impl": "thumb-tui-scene-graph-pairs", "note": "not-SPICE"}
    signature = format_signature(f"relevance-{metric}", {**fields, "data": data})
    if target.is_file():
        try:
            existing = read_relevance(target)
        except RelevanceError:
            existing = None
        if existing is not None and existing.signature == signature:
            return existing, False
    if not replace and os.path.lexists(target):
        raise ValueError(f"{target} exists and holds another matrix; --force replaces it")
    if metric == "cider-d":
        flat = [r for refs in references.values() for r in refs]
        tokens = tokenize([*texts, *flat], tokenizer)  # `auto`: the faster path, same tokens
        hyps, rest, grouped = tokens[: len(texts)], tokens[len(texts):], []
        for refs in references.values():
            grouped.append(rest[: len(refs)])
            rest = rest[len(refs):]
        values = cider_d_all_pairs(hyps, grouped, progress=progress)
    else:
        values = pairwise_relevance(texts, list(references.values()), spice_approx_pair())
    keys = tuple(normalize_id(k) for k in captions["caption_key"])
    image_ids = tuple(normalize_id(i) for i in images)
    truth = tuple((normalize_id(i), k) for i, k in zip(captions["image_key"], keys,
                                                      strict=True))
    matrix = RelevanceMatrix(metric, signature, image_ids, keys, values, truth)
    write_relevance(matrix, write_to or target)
    return matrix, True


def spice_approx_pair() -> Callable[[str, Sequence[str]], float]:
    """spice-approx of one caption against references, parsing each text once."""
    from metrics.text.spice import load_wordnet, scene_tuples, spacy_parser, tuple_f1

    nlp, wordnet, graphs = spacy_parser(), load_wordnet(), {}

    def graph(text: str):
        if text not in graphs:
            graphs[text] = scene_tuples(nlp(text))
        return graphs[text]

    def score(caption: str, references: Sequence[str]) -> float:
        return tuple_f1(graph(caption), set().union(*(graph(r) for r in references)),
                        wordnet)

    return score


# --- comparing models ------------------------------------------------------------------

def metric_label(row: object) -> str:
    """`eccv map@r`, `coco-5k recall@5`, `cider-d sr@5 (m=2)`, `coco-5k rsum`,
    `cider-d ncs@5 (eq5)` (NCS not averaged as the default, the authors' code)."""
    import pandas as pd

    name = row.metric.replace("@k", f"@{int(row.k)}") if not pd.isna(row.k) else row.metric
    suffix = f" (m={int(row.m)})" if not pd.isna(row.m) else ""
    averaging = ncs_label_suffix(row.metric, getattr(row, "signature", None))
    suffix += f" ({averaging})" if averaging else ""
    return f"{row.positives} {name}{suffix}"


# Signature fields that never change a stored value: which cut-offs, m and NCS averaging
# were asked for (each metric's label names its own) and how its CI was computed. Every
# other field does (the set and its contents, PMRP's cap, the thumb-tui version), and a
# field added later does too, until it is named here.
NOT_VALUE_FIELDS = frozenset({"k", "m", "ncs", "bootstrap", "ci", "interval", "seed"})


def value_basis(signature: str) -> tuple[tuple[str, str], ...]:
    """What a stored result's value depends on besides its model and metric, from its
    signature (`retrieval|positives:LABEL#DIGEST|k:…|…`): (("content", DIGEST), and every
    field outside NOT_VALUE_FIELDS). The label is left out (a relevance matrix's records
    are labelled by their view) and the digest read after the last `#`, since a set's
    name may hold `#` or `|` but no later field does."""
    content, _, rest = signature.rpartition("#")[2].partition("|")
    fields = (field.partition(":") for field in rest.split("|") if field)
    return (("content", content),
            *((key, value) for key, _, value in fields if key not in NOT_VALUE_FIELDS))


@dataclass(frozen=True)
class ModelComparison:
    """`ranks`: model, metric, value, rank (only the models scored under each metric);
    `tau`: Kendall τ-b between the metrics' rankings; `versions`: for each positive set or
    matrix whose stored results differ in what they were computed on (another content
    digest, PMRP cap or thumb-tui version), each version's label and the models scored
    on it (those versions are ranked apart); `unranked`: metric -> the one model scored
    under it (a ranking needs two)."""

    ranks: pd.DataFrame
    tau: pd.DataFrame
    versions: dict[str, list[tuple[str, list[str]]]]
    unranked: dict[str, str]


def comparison(engine: Engine, positives: Sequence[str] | None, direction: str
               ) -> ModelComparison:
    """Rank the models under every metric of `direction` (and rsum), from the latest
    stored value per model and metric. Only results computed on the same version of a
    set are ranked together: a set stored with several versions (its contents changed
    between evaluations, say) has one metric row per version, labelled with what tells
    them apart (`project (content:5472d2f8aa) recall@1`). A metric needs two models."""
    frame = results_frame(engine)
    if positives:
        evaluated = list(dict.fromkeys(frame["positives"]))
        unknown = [name for name in dict.fromkeys(positives) if name not in evaluated]
        if unknown:
            raise ValueError(f"no model was evaluated on {', '.join(map(shown, unknown))}; "
                             "the sets evaluated are "
                             f"{', '.join(map(shown, evaluated)) or 'none yet'}")
        frame = frame[frame["positives"].isin(list(positives))]
    frame = frame[frame["direction"].isin([direction, "both"])]
    models = frame["model"].nunique()
    if models < 2:
        raise ValueError(f"comparing needs at least two evaluated models, found {models}; "
                         "evaluate more with `thumb retrieval evaluate`")
    bases = [value_basis(s) for s in frame["signature"]]
    labels = _version_labels(list(zip(frame["positives"], bases, strict=True)))
    frame = frame.assign(positives=[labels[key] for key in zip(frame["positives"], bases,
                                                               strict=True)])
    frame = frame.assign(label=[metric_label(r) for r in frame.itertuples(index=False)])
    wide = frame.drop_duplicates(["model", "label"], keep="last").pivot(
        index="model", columns="label", values="value")
    unranked = {str(c): str(wide[c].first_valid_index()) for c in dict.fromkeys(frame["label"])
                if wide[c].notna().sum() == 1}
    wide = wide[[c for c in dict.fromkeys(frame["label"]) if wide[c].notna().sum() >= 2]]
    if wide.empty:
        raise ValueError("no metric was computed for two models on the same version of a "
                         "set; evaluate more models on it")
    ranks = wide.rank(ascending=False, method="average")
    table = wide.stack().dropna().rename("value").reset_index().merge(
        ranks.stack().dropna().rename("rank").reset_index(), on=["model", "label"])
    versions: dict[str, list[tuple[str, list[str]]]] = {}
    for (name, _), label in labels.items():
        if label != name:
            scored = frame.loc[frame["positives"] == label, "model"]
            versions.setdefault(name, []).append((label, list(dict.fromkeys(scored))))
    return ModelComparison(table.rename(columns={"label": "metric"}), kendall_matrix(wide),
                           versions, unranked)


def _version_labels(keys: Sequence[tuple[str, tuple[tuple[str, str], ...]]]
                    ) -> dict[tuple[str, tuple[tuple[str, str], ...]], str]:
    """Each (set label, value basis) its label in a comparison: the set's own where it has
    one basis, else the set's with the fields that tell its bases apart,
    `project (content:5472d2f8aa)`, `pm (cap:none)`."""
    by_name: dict[str, list[tuple[tuple[str, str], ...]]] = {}
    for name, basis in dict.fromkeys(keys):
        by_name.setdefault(name, []).append(basis)
    labels = {}
    for name, group in by_name.items():
        fields = [dict(basis) for basis in group]
        differing = [key for key in dict.fromkeys(k for f in fields for k in f)
                     if len({f.get(key) for f in fields}) > 1]
        for basis, shown_fields in zip(group, fields, strict=True):
            parts = ", ".join(f"{key}:{shown_fields.get(key, 'none')}" for key in differing)
            labels[(name, basis)] = f"{name} ({parts})" if differing else name
    return labels


def kendall_matrix(wide: pd.DataFrame) -> pd.DataFrame:
    """τ-b between every two columns over the rows both have (NaN when undefined)."""
    import pandas as pd

    from metrics.stats.correlation import correlation

    labels = list(wide.columns)
    tau = pd.DataFrame(np.nan, index=labels, columns=labels)
    values = wide.to_numpy(dtype=float)
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            kept = ~np.isnan(values[:, i]) & ~np.isnan(values[:, j])
            x, y = values[kept, i], values[kept, j]
            if len(x) >= 2 and len(set(x)) > 1 and len(set(y)) > 1:
                tau.loc[a, b] = correlation(x, y, "kendall-b")
    return tau


# --- human agreement -------------------------------------------------------------------

JUDGMENT_COLUMNS = ("image_id", "caption_id", "grade")


def read_judgments(path: Path, targets: Sequence[Target] = ()) -> pd.DataFrame:
    """Graded human judgments of image-caption pairs, one grade per pair, from a CSV with
    the columns image_id, caption_id, grade (e.g. CxC's 0-5 similarity ratings averaged
    over raters, or match-verification answers mapped to numbers). The file is read as
    every import reads one (`storage.imports.import_files`), ids spelt by `normalize_id`; a pair
    graded twice (naming the earlier line) and an image or caption that one of `targets`
    does not know are refused. Every problem of the file, each at its line, is raised at
    once in an InputError; nothing is returned then."""
    import pandas as pd

    from storage.errors import Problems
    from storage.imports.import_files import read_records
    from storage.imports.import_rows import RowError, _number

    problems = Problems(path)
    records = read_records(path, "csv", problems=problems)
    missing = [c for c in JUDGMENT_COLUMNS if records and c not in records[0][1]]
    if missing:
        problems.add(1, f"missing column(s) {', '.join(missing)}")
        problems.raise_if_any()
    known = [(target.label, *target.known_ids()) for target in targets]
    first_line: dict[tuple, int] = {}
    rows = []
    for line, record in records:
        messages: list[str] = []
        image, caption = (_judged_id(record, column, messages)
                          for column in ("image_id", "caption_id"))
        try:
            grade = _number(record, "grade")
            if grade is None:
                messages.append("grade is missing")
        except RowError as error:
            messages.append(str(error))
        if image is not None and caption is not None:
            first = first_line.setdefault((image, caption), line)
            if first != line:
                messages.append(f"the pair ({shown(image)}, {shown(caption)}) is graded "
                                f"already at line {first}")
        for kind, value, position in (("image", image, 1), ("caption", caption, 2)):
            lacking = [k[0] for k in known if value is not None and value not in k[position]]
            if lacking:
                messages.append(f"{kind} {shown(value)} is not in {', '.join(lacking)}")
        for message in messages:
            problems.add(line, message)
        if not messages:
            rows.append((image, caption, grade))
    problems.raise_if_any()
    return pd.DataFrame(rows, columns=list(JUDGMENT_COLUMNS))


def _judged_id(record: Mapping[str, object], column: str, messages: list[str]) -> Id | None:
    """The record's id in `column`, or None with its problem added to `messages`."""
    if record[column] is None:
        messages.append(f"{column} is missing")
        return None
    try:
        return normalize_id(record[column])
    except ValueError as error:
        messages.append(f"{column}: {error}")
        return None


def relevance_agreement(judgments: pd.DataFrame, targets: Sequence[Target], *,
                        bootstrap: int = 1000, ci: float = 0.95, seed: int = 0
                        ) -> pd.DataFrame:
    """How well Recall-style (binary: is the pair a positive of the set) and NCS-style (φ
    of a relevance matrix) relevance follow graded human judgments of the same pairs, as
    `read_judgments(path, targets)` gives them (every pair known to every target)."""
    from metrics.retrieval.relevance import human_agreement

    pairs = list(zip(judgments["image_id"], judgments["caption_id"], strict=True))
    scorers: dict[str, np.ndarray] = {}
    for target in targets:
        if target.kind == "semantic":
            matrix = target.relevance
            row = {image: i for i, image in enumerate(matrix.images)}
            column = {caption: j for j, caption in enumerate(matrix.captions)}
            scorers[f"{target.label} (graded)"] = np.array(
                [matrix.values[row[i], column[c]] for i, c in pairs])
        else:
            positive = {(i, c) for fold in target.folds
                        for i, captions in fold.image_to_captions.items() for c in captions}
            positive |= {(i, c) for fold in target.folds
                         for c, images in fold.caption_to_images.items() for i in images}
            scorers[f"{target.label} (binary)"] = np.array(
                [float(p in positive) for p in pairs])
    return human_agreement(judgments, scorers, bootstrap=bootstrap, ci=ci, seed=seed)

"""The campaign lead's figures while ratings arrive (`thumb monitor`): each annotator's
progress, pace, rushed share and drift, agreement so far on the blind double ratings, and
the alerts where a figure crosses a threshold the lead set (gold accuracy among them: its
counts come from storage/rating/gold.py). Pure functions over plain frames and counts
(storage/rating/monitor.py reads them); no database here.

`ratings` is one row per complete rating (P and R set) with the columns annotator, stage
(1, 2 or 3), image_id, caption_id, precision, recall, seconds (time stored on the rating
itself: the app stores its first pass, from opening the image or the previous first
completion there to its first complete rating; imported ratings may carry their own; 0
where none), image_seconds (the time the app recorded on that annotator's image at that
stage, revisits included; 0 or NaN when none), image_captions (how many captions the image
has) and sequence (the order the ratings were last changed in: a larger number is later).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from metrics.stats.agreement import alpha_table

RATED_STAGES = (1, 2)  # pace, rushed share and drift read stage 1 and stage 2 ratings
DIMENSIONS = ("precision", "recall")
MIN_AGREEMENT_IMAGES = 5  # fewer double-rated images complete: "too few", no number
RECENT = 20  # drift "recent": over each annotator's last RECENT compared captions
# Drift names a person only on captions this many annotators rated: with two, a difference
# cannot say which one drifted, and the two come out as mirror images of each other.
CONSENSUS_RATERS = 3


@dataclass(frozen=True)
class Pace:
    """Time per caption: `timed` captions had a recorded time; `median_seconds` is their
    median; `rushed` of them took less than the threshold (`rushed_share` = rushed/timed).
    None where nothing was timed. `revisit_seconds`: the time spent on images after their
    first pass, which the figures above leave out (None where nothing tells it)."""

    timed: int
    median_seconds: float | None
    rushed: int
    rushed_share: float | None
    revisit_seconds: float | None = None


@dataclass(frozen=True)
class Drift:
    """An annotator's mean P and mean R minus the consensus (the median of the caption's
    raters' values) on the captions that at least CONSENSUS_RATERS annotators rated: over every
    such caption (`captions`) and over the last `recent_captions` of them. None where no
    caption was compared."""

    captions: int
    precision: float | None
    recall: float | None
    recent_captions: int
    recent_precision: float | None
    recent_recall: float | None


@dataclass(frozen=True)
class PairDifference:
    """Two annotators who are the only raters of `captions` captions: `first`'s mean P
    and R minus `second`'s on them. Which of the two drifted, two raters cannot say."""

    first: str
    second: str
    captions: int
    precision: float
    recall: float


@dataclass(frozen=True)
class AgreementFigure:
    """Krippendorff's alpha of one dimension at one level of measurement over the blind
    pairs so far, with its bootstrap CI; `value` None with the reason in `note` while
    there are too few images or alpha is undefined."""

    dimension: str
    level: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    captions: int
    images: int
    note: str | None = None
    ci_warning: str | None = None


@dataclass(frozen=True)
class Thresholds:
    """Where a figure raises an alert: rushed share above `rushed`, |drift| of P or R
    (or the difference between two raters) above `drift`, alpha below `agreement`, gold
    accuracy below `gold`. Rushed share and drift alert only from `min_captions` timed
    (compared) captions on, gold accuracy only from `min_gold` gold answers on, so that
    one caption cannot raise one."""

    rushed: float = 0.2
    drift: float = 0.5
    agreement: float = 0.4
    min_captions: int = 5
    gold: float = 0.7
    min_gold: int = 3


@dataclass(frozen=True)
class Alert:
    # an annotator's name, two of them ("alice vs bob"; stored text: show it escaped) or
    # "agreement"
    subject: str
    message: str


def captions_per_stage(ratings: pd.DataFrame) -> dict[str, dict[int, int]]:
    """annotator -> stage -> how many captions they rated completely at that stage."""
    counts: dict[str, dict[int, int]] = {}
    for (name, stage), size in ratings.groupby(["annotator", "stage"]).size().items():
        counts.setdefault(str(name), {})[int(stage)] = int(size)
    return counts


def seconds_per_caption(ratings: pd.DataFrame) -> pd.Series:
    """Each rating's time, aligned with `ratings`: its own `seconds` where positive;
    otherwise an even share of the time the app recorded on the image (`image_seconds` of
    that annotator, image and stage) among that unit's ratings without a time of their
    own. NaN where no time was recorded at all."""
    own = ratings["seconds"].astype(float).fillna(0.0)
    image = ratings["image_seconds"].astype(float).fillna(0.0)
    untimed = own <= 0
    unit = [ratings["annotator"], ratings["stage"], ratings["image_id"]]
    sharing = untimed.groupby(unit).transform("sum")
    share = image / sharing.where(sharing > 0)
    result = own.where(~untimed, share)
    return result.where(result > 0)


def pace(seconds: Iterable[float], rushed_below: float) -> Pace:
    """The median of the timed captions' seconds and how many took less than
    `rushed_below` (NaN: not timed, left out)."""
    if rushed_below < 0:
        raise ValueError("the rushed threshold must be non-negative")
    timed = np.array([s for s in seconds if s == s], dtype=float)  # s == s: not NaN
    if not len(timed):
        return Pace(0, None, 0, None)
    rushed = int((timed < rushed_below).sum())
    return Pace(len(timed), float(np.median(timed)), rushed, rushed / len(timed))


def revisit_seconds(ratings: pd.DataFrame) -> dict[str, float]:
    """annotator -> seconds spent on their images after the first passes, at stage 1 or 2:
    on each image they have complete whose ratings all carry a time of their own, the
    image's time less those. An image still in progress (its time goes to the captions
    yet to come) or with a rating without its own time (rated before the app stored first
    passes) tells nothing and is left out; an annotator with no image left is absent."""
    rated = ratings[ratings["stage"].isin(RATED_STAGES)]
    units = rated.assign(timed=rated["seconds"] > 0).groupby(
        ["annotator", "stage", "image_id"]).agg(
        first_passes=("seconds", "sum"), timed=("timed", "all"), rated=("seconds", "size"),
        captions=("image_captions", "first"), image_seconds=("image_seconds", "first"))
    known = units[units["timed"] & (units["rated"] == units["captions"])
                  & (units["image_seconds"] > 0)]
    after = (known["image_seconds"] - known["first_passes"]).clip(lower=0.0)
    return {str(name): float(total)
            for name, total in after.groupby(level="annotator").sum().items()}


def paces(ratings: pd.DataFrame, rushed_below: float) -> dict[str, Pace]:
    """annotator -> pace over their stage-1 and stage-2 ratings, each caption timed by its
    first pass, with their revisit time beside it."""
    rated = ratings[ratings["stage"].isin(RATED_STAGES)]
    seconds = seconds_per_caption(rated)
    revisits = revisit_seconds(rated)
    return {str(name): replace(pace(seconds[rows.index], rushed_below),
                               revisit_seconds=revisits.get(str(name)))
            for name, rows in rated.groupby("annotator")}


def _rater_values(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per caption and annotator who rated it at stage 1 or 2: their mean P and R
    (over both stages, had they rated it at both), when they last changed it, and how many
    annotators rated the caption (`raters`)."""
    rated = ratings[ratings["stage"].isin(RATED_STAGES)]
    values = rated.groupby(["caption_id", "annotator"]).agg(
        p=("precision", "mean"), r=("recall", "mean"),
        sequence=("sequence", "max")).reset_index()
    return values.assign(raters=values.groupby("caption_id")["annotator"].transform("size"))


def drifts(ratings: pd.DataFrame, recent: int = RECENT) -> dict[str, Drift]:
    """annotator -> drift: on every caption they rated at stage 1 or 2 that at least
    CONSENSUS_RATERS annotators rated, their value minus the caption's consensus, the
    median of its raters' values, averaged over those captions for P and for R; `recent`:
    the same over their last `recent` such captions (by when their rating last changed).
    The median, not the others' mean: with three raters, one who drifts would move the
    mean of the others of each of the two who agree past any threshold, and blame them
    too; one rater cannot move the median of three or more. Captions with fewer raters
    are `pair_differences`."""
    if recent < 1:
        raise ValueError("recent must be at least 1")
    values = _rater_values(ratings)
    names = sorted({str(name) for name in values["annotator"].unique()})
    consensus = values.groupby("caption_id")[["p", "r"]].transform("median")
    compared = values.assign(p=values["p"] - consensus["p"], r=values["r"] - consensus["r"])
    compared = compared[compared["raters"] >= CONSENSUS_RATERS].sort_values("sequence")
    by_name = {str(name): rows for name, rows in compared.groupby("annotator")}
    result = {}
    for name in names:
        rows = by_name.get(name)
        if rows is None:
            result[name] = Drift(0, None, None, 0, None, None)
            continue
        last = rows.tail(recent)
        result[name] = Drift(len(rows), float(rows["p"].mean()), float(rows["r"].mean()),
                             len(last), float(last["p"].mean()), float(last["r"].mean()))
    return result


def pair_differences(ratings: pd.DataFrame) -> list[PairDifference]:
    """For each two annotators who are the only raters (stage 1 or 2) of some captions:
    the first's (by name) mean P and R minus the second's over those captions, by name."""
    values = _rater_values(ratings)
    two = values[values["raters"] == 2].assign(annotator=lambda f: f["annotator"].astype(str))
    two = two.sort_values(["caption_id", "annotator"]).reset_index(drop=True)
    first, second = two.iloc[0::2].reset_index(drop=True), two.iloc[1::2].reset_index(drop=True)
    differences = pd.DataFrame({"first": first["annotator"], "second": second["annotator"],
                                "p": first["p"] - second["p"], "r": first["r"] - second["r"]})
    return [PairDifference(first_name, second_name, len(rows), float(rows["p"].mean()),
                           float(rows["r"].mean()))
            for (first_name, second_name), rows in differences.groupby(["first", "second"])]


def agreement_so_far(pairs: pd.DataFrame, *, min_images: int = MIN_AGREEMENT_IMAGES,
                     levels: Sequence[str] = ("ordinal", "interval"), bootstrap: int = 500,
                     ci: float = 0.90, seed: int = 0,
                     marked: int | None = None) -> list[AgreementFigure]:
    """Krippendorff's alpha of P and R over the blind pairs (`pairs`: one row per caption
    with image, caption_id, `<dimension>_a` and `<dimension>_b`), with BCa bootstrap CIs
    resampling images (`metrics.stats.agreement.alpha_table`); with fewer than `min_images`
    images, no value and the note "too few" — which says so when fewer than that many
    images are `marked` for double rating at all (it can never fill then)."""
    images = int(pairs["image"].nunique()) if len(pairs) else 0
    few = f"too few: {images} of {min_images} images"
    if marked is not None and marked < min_images:
        few += f" (only {marked} marked: thumb assign --double)"
    figures = []
    for dimension in DIMENSIONS:
        if images < min_images:
            figures += [AgreementFigure(dimension, level, None, None, None, len(pairs), images,
                                        few)
                        for level in levels]
            continue
        long = pd.concat([
            pd.DataFrame({"caption_id": pairs["caption_id"], "rater": side,
                          "value": pairs[f"{dimension}_{side}"].astype(float),
                          "image": pairs["image"]})
            for side in ("a", "b")], ignore_index=True)
        table = alpha_table(long, "caption_id", "rater", "value", "image", levels=levels,
                            bootstrap=bootstrap, ci=ci, seed=seed)
        for record, level in zip(table.to_dict("records"), levels, strict=True):
            figures.append(AgreementFigure(
                dimension, level, record["value"], record["ci_low"], record["ci_high"],
                len(pairs), images, record["note"], record["ci_warning"]))
    return figures


def alerts(paces_: Mapping[str, Pace], drifts_: Mapping[str, Drift],
           agreement: Sequence[AgreementFigure], thresholds: Thresholds,
           gold: Mapping[str, tuple[int, int]] | None = None,
           pairs: Sequence[PairDifference] = ()) -> list[Alert]:
    """Every figure beyond its threshold: an annotator's rushed share, their drift in P or
    R (overall, and recent where it covers fewer captions; from `min_captions` compared
    captions on), the difference in P or R between two annotators who alone rated
    `min_captions` captions or more (`pairs`: named as a pair, neither blamed), their gold
    accuracy (`gold`: annotator -> (gold answers, right ones); from `min_gold` answers
    on), and alpha of P or R below its threshold at any level (one alert per dimension,
    naming the levels; only where alpha has a value)."""
    found = []
    for name, figure in sorted(paces_.items()):
        if figure.rushed_share is not None and figure.timed >= thresholds.min_captions \
                and figure.rushed_share > thresholds.rushed:
            found.append(Alert(name, f"rushed {figure.rushed_share:.0%} of {figure.timed} "
                                     f"captions (alert above {thresholds.rushed:.0%})"))
    for name, figure in sorted(drifts_.items()):
        shown = [("P", figure.precision, figure.captions), ("R", figure.recall, figure.captions)]
        if figure.recent_captions < figure.captions:  # else "recent" is the same figure
            shown += [("recent P", figure.recent_precision, figure.recent_captions),
                      ("recent R", figure.recent_recall, figure.recent_captions)]
        for label, value, count in shown:
            if value is not None and count >= thresholds.min_captions \
                    and abs(value) > thresholds.drift:
                found.append(Alert(name, f"drift {label} {value:+.2f} over {count} captions "
                                         f"(alert beyond ±{thresholds.drift:g})"))
    for pair in pairs:
        for label, value in (("P", pair.precision), ("R", pair.recall)):
            if pair.captions >= thresholds.min_captions and abs(value) > thresholds.drift:
                found.append(Alert(
                    f"{pair.first} vs {pair.second}",
                    f"{label} differs by {value:+.2f} over {pair.captions} captions only they "
                    f"rated; two raters cannot say which one drifted (alert beyond "
                    f"±{thresholds.drift:g})"))
    for name, (answered, correct) in sorted((gold or {}).items()):
        if answered and answered >= thresholds.min_gold \
                and correct / answered < thresholds.gold:
            found.append(Alert(name, f"gold {correct}/{answered} right "
                                     f"({correct / answered:.0%}; alert below "
                                     f"{thresholds.gold:.0%})"))
    for dimension in dict.fromkeys(figure.dimension for figure in agreement):
        low = [f"{figure.value:.2f} {figure.level}" for figure in agreement
               if figure.dimension == dimension and figure.value is not None
               and figure.value < thresholds.agreement]
        if low:
            found.append(Alert("agreement", f"α of {dimension} {', '.join(low)} (alert "
                                            f"below {thresholds.agreement:g})"))
    return found

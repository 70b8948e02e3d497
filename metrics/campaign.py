"""The campaign lead's figures while ratings arrive (`thumb monitor`): each annotator's
progress, pace, rushed share and drift, agreement so far on the blind double ratings, and
the alerts where a figure crosses a threshold the lead set (gold accuracy among them: its
counts come from storage/gold.py). Pure functions over plain frames and counts
(storage/monitor.py reads them); no database here.

`ratings` is one row per complete rating (P and R set) with the columns annotator, stage
(1, 2 or 3), image_id, caption_id, precision, recall, seconds (time stored on the rating
itself; imported ratings may carry it, the app leaves it 0), image_seconds (the time the
app recorded on that annotator's image at that stage; 0 or NaN when none) and sequence
(the order the ratings were last changed in: a larger number is later)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from metrics.agreement import alpha_table

RATED_STAGES = (1, 2)  # pace, rushed share and drift read stage 1 and stage 2 ratings
DIMENSIONS = ("precision", "recall")
MIN_AGREEMENT_IMAGES = 5  # fewer double-rated images complete: "too few", no number
RECENT = 20  # drift "recent": over each annotator's last RECENT compared captions


@dataclass(frozen=True)
class Pace:
    """Time per caption: `timed` captions had a recorded time; `median_seconds` is their
    median; `rushed` of them took less than the threshold (`rushed_share` = rushed/timed).
    None where nothing was timed."""

    timed: int
    median_seconds: float | None
    rushed: int
    rushed_share: float | None


@dataclass(frozen=True)
class Drift:
    """An annotator's mean P and mean R minus the others' mean on the same captions:
    over every compared caption (`captions`) and over the last `recent_captions` of them.
    None where no caption was compared."""

    captions: int
    precision: float | None
    recall: float | None
    recent_captions: int
    recent_precision: float | None
    recent_recall: float | None


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
    above `drift`, alpha below `agreement`, gold accuracy below `gold`. Rushed share and
    drift alert only from `min_captions` timed (compared) captions on, gold accuracy
    only from `min_gold` gold answers on, so that one caption cannot raise one."""

    rushed: float = 0.2
    drift: float = 0.5
    agreement: float = 0.4
    min_captions: int = 5
    gold: float = 0.7
    min_gold: int = 3


@dataclass(frozen=True)
class Alert:
    subject: str  # an annotator's name (stored text: show it escaped) or "agreement"
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


def paces(ratings: pd.DataFrame, rushed_below: float) -> dict[str, Pace]:
    """annotator -> pace over their stage-1 and stage-2 ratings."""
    rated = ratings[ratings["stage"].isin(RATED_STAGES)]
    seconds = seconds_per_caption(rated)
    return {str(name): pace(seconds[rows.index], rushed_below)
            for name, rows in rated.groupby("annotator")}


def drifts(ratings: pd.DataFrame, recent: int = RECENT) -> dict[str, Drift]:
    """annotator -> drift: on every caption they rated at stage 1 or 2 that someone else
    rated at stage 1 or 2 too, their value minus the mean of the others' values (their own
    mean if they rated it twice), averaged over those captions for P and for R; `recent`:
    the same over their last `recent` such captions (by when their rating last changed)."""
    if recent < 1:
        raise ValueError("recent must be at least 1")
    rated = ratings[ratings["stage"].isin(RATED_STAGES)]
    names = sorted({str(name) for name in rated["annotator"].unique()})
    # per caption and annotator: their mean, and the sums and counts of everyone's values
    mine = rated.groupby(["caption_id", "annotator"]).agg(
        p_sum=("precision", "sum"), r_sum=("recall", "sum"), n=("precision", "size"),
        sequence=("sequence", "max")).reset_index()
    everyone = mine.groupby("caption_id")[["p_sum", "r_sum", "n"]].transform("sum")
    others = everyone["n"] - mine["n"]
    compared = mine.assign(
        p=mine["p_sum"] / mine["n"] - (everyone["p_sum"] - mine["p_sum"]) / others,
        r=mine["r_sum"] / mine["n"] - (everyone["r_sum"] - mine["r_sum"]) / others,
    )[others > 0].sort_values("sequence")
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


def agreement_so_far(pairs: pd.DataFrame, *, min_images: int = MIN_AGREEMENT_IMAGES,
                     levels: Sequence[str] = ("ordinal", "interval"), bootstrap: int = 500,
                     ci: float = 0.90, seed: int = 0,
                     marked: int | None = None) -> list[AgreementFigure]:
    """Krippendorff's alpha of P and R over the blind pairs (`pairs`: one row per caption
    with image, caption_id, `<dimension>_a` and `<dimension>_b`), with BCa bootstrap CIs
    resampling images (`metrics.agreement.alpha_table`); with fewer than `min_images`
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
           gold: Mapping[str, tuple[int, int]] | None = None) -> list[Alert]:
    """Every figure beyond its threshold: an annotator's rushed share, their drift in P or
    R (overall, and recent where it covers fewer captions; from `min_captions` compared
    captions on), their gold accuracy (`gold`: annotator -> (gold answers, right ones);
    from `min_gold` answers on), and alpha of P or R below its threshold at any level (one
    alert per dimension, naming the levels; only where alpha has a value)."""
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

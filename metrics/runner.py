"""Run metrics over captions: which captions need scoring under a signature, scoring them
chunk by chunk, and handing each chunk to a sink that stores it. No database here: the
caller says what is stored already and where scores go."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics.base import CaptionItem, Metric, ReferenceRule
from rubrics import clean_caption

Progress = Callable[[str, int, int], None]  # (metric, done, total)
# (metric, signature, items, values, reasons, replacing): a value is NaN where its reason
# says why; `replacing` names the items whose stored undefined scores these values replace
ScoreSink = Callable[[str, str, Sequence[CaptionItem], np.ndarray, list[str | None],
                      set[int]], None]
# caption id -> why its stored score is undefined (None: it has a value)
StoredScores = Callable[[str], Mapping[int, str | None]]
STORE_CHUNK = 512


@dataclass(frozen=True)
class MetricRun:
    metric: str
    signature: str
    computed: int
    reused: int
    seconds: float
    # shown beside the signature: how many references were their caption itself
    # (ReferenceRule.beside_signature); None for a metric that uses no references
    self_references: str | None = None


CLEAN_UPS = ("thumb", "none")  # THUMB's minimal clean-up of every text, or the texts as given


def caption_items(captions: Iterable[Any], references: dict[int, list[str]],
                  keep_self_references: bool = False, clean: str = "thumb",
                  reference_ids: dict[int, list[str | None]] | None = None
                  ) -> tuple[list[CaptionItem], ReferenceRule]:
    """Every caption (rows with attributes caption_id, image_id, image_key, path, system,
    text, and optionally external_id) with its image's references minus the caption itself
    (unless `keep_self_references`, which reproduces scores computed on data where a
    caption is also one of its own references, as THUMB 1.0's were). Also returns the
    rule that goes into each signature.

    `clean`: `thumb` applies THUMB's clean-up (`rubrics.clean_caption`) to captions and
    references; `none` scores the texts as given. A reference is the caption itself when
    both carry an id (the caption's `external_id`, the image's `reference_ids`) and the ids
    are equal, else when their texts are equal as scored: under `thumb` after the clean-up,
    ignoring case; under `none` character for character (a text in capitals is another
    text to the metrics, so it stays a reference). The signature says which rule
    (`self:excluded`; `self:excluded-by-id` when ids were compared, `self:excluded-exact`
    when texts were compared character for character under `none`), never how many: a
    count of the data would change every caption's signature when one caption is
    imported. The rule carries the count apart (`ReferenceRule.self_reference_count`)."""
    if clean not in CLEAN_UPS:
        raise ValueError(f"the text clean-up is thumb or none, not {clean!r}")
    prepare = clean_caption if clean == "thumb" else str
    texts = {image: [prepare(text) for text in refs] for image, refs in references.items()}
    # the form in which a caption and a reference are the same text: as scored, and under
    # THUMB's clean-up also ignoring case
    same_text = str.casefold if clean == "thumb" else str
    match_keys: dict[int, list[str]] = {}
    reference_ids = reference_ids or {}
    items, by_id, found = [], False, 0
    for row in captions:
        text = prepare(row.text)
        refs = texts.get(row.image_id, [])
        own_id = getattr(row, "external_id", None)
        ids = reference_ids.get(row.image_id, [])
        if own_id is not None and any(i is not None for i in ids):
            itself = [i == own_id for i in ids]
            by_id = True
        else:
            if row.image_id not in match_keys:
                match_keys[row.image_id] = [same_text(r) for r in refs]
            key = same_text(text)
            itself = [k == key for k in match_keys[row.image_id]]
        found += sum(itself)
        kept = tuple(refs) if keep_self_references else tuple(
            r for r, same in zip(refs, itself, strict=True) if not same)
        items.append(CaptionItem(int(row.caption_id), row.image_key, row.path, row.system,
                                 text, kept))
    # the rule's name says how a self-reference was found, so that scores stored under
    # another rule are computed again, not reused
    found_by = ("-by-id" if by_id else "-exact" if clean == "none" and not keep_self_references
                else "")
    how = f"{'kept' if keep_self_references else 'excluded'}{found_by}"
    return items, ReferenceRule(self_references=how, clean=clean, self_reference_count=found)


def run_metric(
    metric: Metric, items: Sequence[CaptionItem], references: ReferenceRule,
    stored: StoredScores, sink: ScoreSink, progress: Progress | None = None,
) -> MetricRun:
    """Score the captions that have no score under the signature yet (`stored(signature)`),
    and those stored as undefined for a reason that no longer holds (an image that had no
    references when they were scored has them now: the signature names rules, not data,
    so it does not change), and pass each chunk to the sink as soon as it is scored."""
    start = time.perf_counter()
    signature = metric.signature(items, references)
    done = stored(signature)
    todo = [item for item in items if _needs_scoring(metric, item, done)]
    if todo and metric.corpus_level:
        # statistics come from the whole corpus: score it all, store what is missing
        values = metric.score(items)
        wanted = {item.caption_id for item in todo}
        keep = [i for i, item in enumerate(items) if item.caption_id in wanted]
        chunk = [items[i] for i in keep]
        sink(metric.name, signature, chunk, values[keep], _reasons(metric, chunk),
             _replaced(chunk, done))
        if progress:
            progress(metric.name, len(todo), len(todo))
    else:
        for start_at in range(0, len(todo), STORE_CHUNK):
            chunk = todo[start_at:start_at + STORE_CHUNK]
            sink(metric.name, signature, chunk, metric.score(chunk), _reasons(metric, chunk),
                 _replaced(chunk, done))
            if progress:
                progress(metric.name, start_at + len(chunk), len(todo))
    return MetricRun(metric.name, signature, len(todo), len(items) - len(todo),
                     time.perf_counter() - start,
                     references.beside_signature(metric.needs_references))


def _needs_scoring(metric: Metric, item: CaptionItem, done: Mapping[int, str | None]) -> bool:
    if item.caption_id not in done:
        return True
    reason = done[item.caption_id]
    return reason is not None and metric.undefined_reason(item) != reason


def _replaced(chunk: Sequence[CaptionItem], done: Mapping[int, str | None]) -> set[int]:
    return {item.caption_id for item in chunk if item.caption_id in done}


def _reasons(metric: Metric, items: Sequence[CaptionItem]) -> list[str | None]:
    return [metric.undefined_reason(item) for item in items]

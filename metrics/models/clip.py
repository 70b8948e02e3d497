"""CLIP-S, RefCLIP-S and RefOnlyC (Hessel et al. 2021) as THUMB used them.

Texts are prefixed "A photo depicts"; CLIP-S = 2.5 * max(cos(image, caption), 0); the
reference term is the best max(cos(caption, reference), 0) over the (prefixed) references;
RefCLIP-S is the harmonic mean of the two; RefOnlyC is the reference term alone. Every
distinct image and text is embedded once per model, however many metrics use it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from metrics.base import BATCH_SIZE, DEVICE, CaptionItem, Metric, MetricOption
from metrics.models.torch_device import (
    in_batches,
    load_error,
    model_batch_size,
    model_label,
    resolve_device,
)
from metrics.signature import package_version

DEFAULT_CLIP = "openai/clip-vit-base-patch32"
PREFIX = "A photo depicts "
WEIGHT = 2.5


TEXT_TOKENS = 77  # CLIP's context length


class ClipEmbedder:
    """A CLIP model with caches of normalised image and text embeddings. Batch sizes: the
    one given, else from the free GPU memory (CUDA) or 64 (CPU)."""

    def __init__(self, model: str, device: str = "auto", batch_size: int | None = None
                 ) -> None:
        import torch
        from transformers import CLIPModel, CLIPProcessor

        self.name = model
        self.device = resolve_device(device)
        self.dtype = torch.float16 if self.device.startswith("cuda") else torch.float32
        try:
            self.processor = CLIPProcessor.from_pretrained(model)
            self.model = CLIPModel.from_pretrained(model, dtype=self.dtype).to(self.device)
        except (OSError, ValueError) as exc:
            raise load_error("CLIP", model, exc) from exc
        self.model.eval()
        vision, text = self.model.config.vision_config, self.model.config.text_config
        patches = (vision.image_size // vision.patch_size) ** 2 + 1
        self.image_batch = model_batch_size(self.device, vision, patches, batch_size)
        self.text_batch = model_batch_size(self.device, text, TEXT_TOKENS, batch_size)
        self._images: dict[str, np.ndarray] = {}
        self._texts: dict[str, np.ndarray] = {}

    @staticmethod
    def _normalise(features) -> np.ndarray:
        array = features.float().cpu().numpy()
        return array / np.linalg.norm(array, axis=1, keepdims=True)

    def images(self, paths: Sequence[str]) -> np.ndarray:
        missing = [p for p in dict.fromkeys(paths) if p not in self._images]
        vectors, self.image_batch = in_batches(self._embed_images, missing, self.image_batch)
        self._images.update(zip(missing, vectors, strict=True))
        return np.stack([self._images[p] for p in paths])

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._texts]
        vectors, self.text_batch = in_batches(self._embed_texts, missing, self.text_batch)
        self._texts.update(zip(missing, vectors, strict=True))
        return np.stack([self._texts[t] for t in texts])

    def _embed_images(self, paths: Sequence[str]) -> list[np.ndarray]:
        import torch
        from PIL import Image

        pictures = [Image.open(path).convert("RGB") for path in paths]
        inputs = self.processor(images=pictures, return_tensors="pt").to(self.device)
        with torch.no_grad():
            features = self.model.get_image_features(
                pixel_values=inputs["pixel_values"].to(self.dtype))
        return list(self._normalise(_pooled(features)))

    def _embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        import torch

        inputs = self.processor(text=list(texts), return_tensors="pt", padding=True,
                                truncation=True, max_length=TEXT_TOKENS).to(self.device)
        with torch.no_grad():
            features = self.model.get_text_features(
                input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        return list(self._normalise(_pooled(features)))


def _pooled(features):
    """transformers returns a tensor, or (in newer versions) an output with pooler_output."""
    return getattr(features, "pooler_output", features)


@cache
def embedder(model: str, device: str, batch_size: int | None) -> ClipEmbedder:
    """One embedder (and cache) per model and device, shared by the three variants."""
    return ClipEmbedder(model, device, batch_size)


def clip_components(
    clip: ClipEmbedder, items: Sequence[CaptionItem], need_images: bool
) -> tuple[np.ndarray | None, np.ndarray]:
    """(CLIP-S per item or None, reference term per item)."""
    captions = clip.texts([PREFIX + item.text for item in items])
    flat = [PREFIX + ref for item in items for ref in item.references]
    references = clip.texts(flat) if flat else np.zeros((0, captions.shape[1]))
    ref_term = np.zeros(len(items))
    start = 0
    for index, item in enumerate(items):
        count = len(item.references)
        if count:
            cosines = references[start:start + count] @ captions[index]
            ref_term[index] = max(float(cosines.max()), 0.0)
        start += count
    if not need_images:
        return None, ref_term
    missing = [item.image_path or item.image_key for item in items
               if not item.image_path or not Path(item.image_path).is_file()]
    if missing:
        raise RuntimeError(f"CLIP-S needs the image files; {len(missing)} not found, "
                           f"e.g. {missing[0]}")
    images = clip.images([item.image_path for item in items])  # type: ignore[misc]
    clip_s = WEIGHT * np.maximum(np.einsum("ij,ij->i", images, captions), 0.0)
    return clip_s, ref_term


class ClipMetric(Metric):
    """The three CLIP-based metrics share a model and its embeddings; each subclass names
    which of the terms it reports."""

    options = (
        MetricOption("clip_model", "model", DEFAULT_CLIP, "CLIP model name or local folder."),
        DEVICE,
        BATCH_SIZE,
    )

    def __init__(self, model: str = DEFAULT_CLIP, device: str = "auto",
                 batch_size: int | None = None) -> None:
        self.model, self.batch_size = model, batch_size
        self.device = resolve_device(device)

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": f"transformers-{package_version('transformers')}",
                "model": model_label(self.model), "prefix": PREFIX.strip().replace(" ", "_"),
                "w": str(WEIGHT), "dtype": "fp16" if self.device.startswith("cuda") else "fp32"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        clip = embedder(self.model, self.device, self.batch_size)
        clip_s, ref_term = clip_components(clip, items, need_images=self.name != "refonly-c")
        if self.name == "refonly-c":
            return ref_term
        assert clip_s is not None
        if self.name == "clip-s":
            return clip_s
        total = clip_s + ref_term
        return np.divide(2 * clip_s * ref_term, total, out=np.zeros_like(total),
                         where=total > 0)


class ClipS(ClipMetric):
    name = "clip-s"
    help = "CLIP-S: 2.5 x cosine of image and caption (reference-free)"
    needs_references = False
    needs_images = True


class RefClipS(ClipMetric):
    name = "refclip-s"
    help = "RefCLIP-S: harmonic mean of CLIP-S and the best reference similarity"
    needs_images = True


class RefOnlyC(ClipMetric):
    name = "refonly-c"
    help = "RefOnlyC: the best caption-reference CLIP similarity alone"

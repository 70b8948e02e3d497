"""BERTScore F1 (bert-score), the best over a caption's references."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from metrics.base import BATCH_SIZE, DEVICE, CaptionItem, Metric, MetricOption
from metrics.models.torch_device import (
    at_fitting_size,
    load_error,
    model_batch_size,
    model_label,
    resolve_device,
)
from metrics.signature import digest, package_version
from metrics.untrusted import regular_file

# The paper's setting: roberta-large, layer 17 (bert-score's own default for it).
DEFAULT_MODEL = "roberta-large"
DEFAULT_LAYER = 17
CAPTION_TOKENS = 64  # subword tokens a caption batch is padded to, for the memory estimate


class BertScore(Metric):
    """Model and layer are configurable, any local model path works (give its layer);
    idf weighting and baseline rescaling are options. The batch size is the one given, else
    from the free GPU memory (CUDA) or 64 (CPU); halved when a batch runs out of memory.
    The captions given are scored in one bert-score call, so the scores are exactly those
    of `BERTScorer.score` on the same captions.

    With idf, the idf corpus is every distinct reference of the captions a run scores (the
    project's, or the judgment set's) and its digest is in the signature (`idf:yes#…`):
    the metric is then corpus-level, so a changed corpus rescores every caption and no
    caption keeps a score from another corpus. A baseline file's digest is in the
    signature too (`rescale:file#…`); bert-score's own baselines come with its version."""

    name = "bertscore"
    help = "BERTScore F1, best over the references (bert-score; any model and layer)"
    options = (
        MetricOption("bert_model", "model", DEFAULT_MODEL,
                     "BERTScore model name or local folder."),
        MetricOption("bert_layer", "layer", None,
                     "BERTScore layer (default 17 for roberta-large).", int),
        MetricOption("bert_idf", "idf", False, "BERTScore idf weighting.", bool),
        MetricOption("bert_rescale", "rescale", False,
                     "Rescale BERTScore with the baseline.", bool),
        MetricOption("bert_baseline", "baseline_path", None,
                     "BERTScore baseline file for a local model."),
        DEVICE,
        BATCH_SIZE,
    )

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        layer: int | None = None,
        *,
        idf: bool = False,
        rescale: bool = False,
        baseline_path: str | None = None,
        device: str = "auto",
        batch_size: int | None = None,
    ) -> None:
        if layer is None:
            if model != DEFAULT_MODEL:
                raise ValueError(f"give the layer to use for {model!r} (--bert-layer N)")
            layer = DEFAULT_LAYER
        if layer < 0:
            raise ValueError(f"--bert-layer must be 0 (the embeddings) or more, not {layer}")
        self.model, self.layer = model, layer
        self.idf, self.rescale, self.baseline_path = idf, rescale, baseline_path
        self.corpus_level = idf  # each caption's idf weights come from every reference
        self.rescaling = _rescaling(model, baseline_path) if rescale else "no"
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self._scorer = None

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {
            "impl": f"bert-score-{package_version('bert-score')}",
            "model": model_label(self.model),
            "layer": str(self.layer),
            "idf": f"yes#{digest(idf_corpus(items))}" if self.idf else "no",
            "rescale": self.rescaling,
            "agg": "max-f1",
            # on CUDA, bert-score's call runs under torch's autocast (torch.float16)
            "dtype": "fp16-autocast" if self.device.startswith("cuda") else "fp32",
        }

    def _load(self, items: Sequence[CaptionItem]):
        """bert-score's `BERTScorer`, and the batch size from the model's widths, read from
        its configuration through transformers' public `AutoConfig` (bert-score keeps its
        model private)."""
        from bert_score import BERTScorer
        from transformers import AutoConfig

        try:
            scorer = BERTScorer(
                model_type=self.model, num_layers=self.layer, idf=self.idf,
                idf_sents=idf_corpus(items) if self.idf else None,
                device=self.device, batch_size=self.batch_size, lang="en",
                rescale_with_baseline=self.rescale, baseline_path=self.baseline_path,
            )
            config = AutoConfig.from_pretrained(self.model)
        except (OSError, ValueError, KeyError) as exc:
            raise load_error("BERTScore", self.model, exc) from exc
        except AssertionError as exc:  # bert-score checks the layer against the model depth
            raise ValueError(f"--bert-layer {self.layer}: {exc}") from exc
        self.batch_size = model_batch_size(self.device, config, CAPTION_TOKENS,
                                           self.batch_size)
        return scorer

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        import torch

        if self._scorer is None:
            self._scorer = self._load(items)
        scorer = self._scorer

        texts = [item.text for item in items]
        references = [list(item.references) for item in items]

        def f1(batch_size: int) -> np.ndarray:
            # one call: bert-score embeds each distinct sentence once, longest first; in
            # fp16 on CUDA through torch's autocast, since bert-score takes no dtype
            with torch.autocast("cuda", dtype=torch.float16,
                                enabled=self.device.startswith("cuda")):
                _, _, values = scorer.score(texts, references, batch_size=batch_size)
            return values.float().numpy()

        values, self.batch_size = at_fitting_size(f1, self.batch_size)
        return values


def idf_corpus(items: Sequence[CaptionItem]) -> list[str]:
    """The sentences idf is computed from: every distinct reference of the captions, sorted."""
    return sorted({reference for item in items for reference in item.references})


def _rescaling(model: str, baseline_path: str | None) -> str:
    """The signature's `rescale` field: `yes` for bert-score's own baseline of the model
    (fixed by bert-score's version), `file#DIGEST` for a baseline file. ValueError when
    there is no baseline: a local model has none in bert-score."""
    if baseline_path is None:
        package = find_spec("bert_score")  # found, not imported: a run may need no model
        folder = Path(package.origin).parent if package and package.origin else None
        if folder is None or Path(model).is_absolute() or not (
                folder / "rescale_baseline" / "en" / f"{model}.tsv").is_file():
            raise ValueError(f"--bert-rescale: bert-score has no baseline for the model "
                             f"{model!r} (a local model never has one); give one with "
                             "--bert-baseline FILE")
        return "yes"
    try:
        with open(regular_file(baseline_path), "rb") as handle:
            content = hashlib.file_digest(handle, "sha256").hexdigest()
    except ValueError as exc:  # regular_file's: no such file, not a regular file
        raise ValueError(f"--bert-baseline {exc}") from None
    except OSError as exc:
        raise ValueError(f"--bert-baseline {baseline_path}: cannot read: "
                         f"{exc.strerror or exc}") from None
    return f"file#{content[:10]}"

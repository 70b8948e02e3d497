"""Device choice for the neural metrics: CUDA when present (in fp16), else CPU; batch sizes
from the free GPU memory, halved when a batch still runs out of it."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

CPU_BATCH = 64  # on the CPU a larger batch gains nothing and holds more memory
MAX_BATCH = 1024
GPU_SHARE = 0.5  # of the free memory, for activations; the rest absorbs fragmentation
Item = TypeVar("Item")
Output = TypeVar("Output")


def resolve_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"device must be auto, cpu or cuda, not {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
    return device


def model_label(name_or_path: str) -> str:
    """How a model appears in signatures: its hub name, or `local:<folder>#<config hash>`
    for a local folder (two folders with the same name but other models differ)."""
    from pathlib import Path

    from metrics.signature import digest

    path = Path(name_or_path)
    if not path.exists():
        return name_or_path
    config = path / "config.json"
    text = config.read_text(encoding="utf-8") if config.is_file() else str(path.resolve())
    return f"local:{path.name}#{digest([text], 8)}"


def load_error(kind: str, name: str, exc: Exception) -> RuntimeError:
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    # the libraries' messages run over several lines; ours is one (a metric's error is
    # printed on one line, a line break in it shown as a literal `\n`)
    reason = " ".join(str(exc).split())
    return RuntimeError(
        f"cannot load the {kind} model {name!r} ({type(exc).__name__}: {reason}). Without "
        "internet access, download it elsewhere (e.g. save_pretrained) and pass its local "
        "folder instead of the name"
        + ("; or let it be fetched from the hub (--allow-download)." if offline else ".")
    )


def activation_bytes(tokens: int, hidden: int, intermediate: int, heads: int,
                     dtype_bytes: int) -> int:
    """Peak activation memory of one input in a transformer layer without gradients: the
    hidden states, the feed-forward expansion and the attention matrices, twice over for
    the intermediate copies."""
    return 2 * dtype_bytes * (tokens * (4 * hidden + intermediate) + 2 * heads * tokens**2)


def model_batch_size(device: str, config: object, tokens: int, requested: int | None = None
                     ) -> int:
    """`auto_batch_size` for inputs of `tokens` tokens through a transformer whose
    (transformers) config gives its widths; fp16 on CUDA."""
    return auto_batch_size(device, activation_bytes(
        tokens, config.hidden_size, config.intermediate_size,  # type: ignore[attr-defined]
        config.num_attention_heads,  # type: ignore[attr-defined]
        2 if device.startswith("cuda") else 4), requested)


def auto_batch_size(device: str, bytes_per_item: int, requested: int | None = None) -> int:
    """The batch size asked for; else, on CUDA, the power of two whose activations fill
    `GPU_SHARE` of the free memory (at most `MAX_BATCH`); else `CPU_BATCH`."""
    if requested:
        return requested
    if not device.startswith("cuda"):
        return CPU_BATCH
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    fits = int(free * GPU_SHARE) // max(1, bytes_per_item)
    return max(1, min(MAX_BATCH, 1 << max(0, fits.bit_length() - 1)))


def at_fitting_size(function: Callable[[int], Output], batch_size: int
                    ) -> tuple[Output, int]:
    """`function(batch_size)`, retried at half the size while it runs out of GPU memory.
    Returns its output and the size that fitted."""
    import torch

    while True:
        try:
            return function(batch_size), batch_size
        except torch.cuda.OutOfMemoryError:
            if batch_size == 1:
                raise
            torch.cuda.empty_cache()
            batch_size //= 2


def in_batches(function: Callable[[Sequence[Item]], list[Output]], inputs: Sequence[Item],
               batch_size: int) -> tuple[list[Output], int]:
    """`function` over `inputs` batch by batch; a batch that runs out of GPU memory is
    retried at half the size, which then stays. Returns the outputs and the last size."""
    outputs: list[Output] = []
    start = 0
    while start < len(inputs):
        done, batch_size = at_fitting_size(
            lambda size, start=start: function(inputs[start:start + size]), batch_size)
        outputs.extend(done)
        start += batch_size
    return outputs, batch_size

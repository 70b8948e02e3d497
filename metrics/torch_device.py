"""Device choice for the neural metrics: CUDA when present (in fp16), else CPU."""

from __future__ import annotations

import os


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
    return RuntimeError(
        f"cannot load the {kind} model {name!r} ({type(exc).__name__}: {exc}). Without "
        "internet access, download it elsewhere (e.g. save_pretrained) and pass its local "
        "folder instead of the name"
        + ("; or let it be fetched from the hub (--allow-download)." if offline else ".")
    )

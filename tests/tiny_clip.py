"""A tiny, randomly initialised CLIP saved to a folder: tests load it by path, offline."""

from __future__ import annotations

import json
from pathlib import Path


def _byte_alphabet() -> list[str]:
    """The 256 printable stand-ins GPT-2/CLIP byte-level BPE uses for raw bytes."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
            + list(range(ord("®"), ord("ÿ") + 1)))
    alphabet, extra = [], 0
    for byte in range(256):
        if byte in keep:
            alphabet.append(chr(byte))
        else:
            alphabet.append(chr(256 + extra))
            extra += 1
    return alphabet


def save_tiny_clip(folder: Path) -> Path:
    """Build CLIP with 2-layer text and vision towers, a byte-level vocabulary and no merges,
    and `save_pretrained` it (model, tokenizer, image processor) into `folder`."""
    import torch
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        CLIPTokenizer,
    )

    folder.mkdir(parents=True, exist_ok=True)
    symbols = _byte_alphabet()
    vocabulary = symbols + [s + "</w>" for s in symbols] + ["<|startoftext|>", "<|endoftext|>"]
    (folder / "vocab.json").write_text(
        json.dumps({token: index for index, token in enumerate(vocabulary)}), encoding="utf-8"
    )
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32},
                                         crop_size={"height": 32, "width": 32})
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={"vocab_size": len(vocabulary), "hidden_size": 32,
                     "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "max_position_embeddings": 77,
                     "bos_token_id": len(vocabulary) - 2, "eos_token_id": len(vocabulary) - 1,
                     "pad_token_id": len(vocabulary) - 1},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "image_size": 32, "patch_size": 8},
        projection_dim=16,
    )
    CLIPModel(config).save_pretrained(folder)
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)
    return folder

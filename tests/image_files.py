"""Broken and hostile image files for the tests, made on the spot."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from PIL import Image


def good_png(path: Path, size: tuple[int, int] = (8, 6)) -> Path:
    Image.new("RGB", size, (200, 30, 30)).save(path)
    return path


def bomb_png(path: Path, side: int = 20_000) -> Path:
    """A PNG whose header claims side x side pixels (400 million for 20,000): what a
    decompression bomb looks like before it is decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\0" * 64)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body)
                     + chunk(b"IEND", b""))
    return path


def truncated_png(path: Path) -> Path:
    good_png(path, (64, 64))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def broken_files(folder: Path) -> dict[str, Path]:
    """name -> a file that is no usable image."""
    folder.mkdir(parents=True, exist_ok=True)
    empty = folder / "empty.png"
    empty.write_bytes(b"")
    noise = folder / "noise.png"
    noise.write_bytes(bytes(range(256)) * 8)
    text = folder / "text.jpg"
    text.write_text("this is not a picture\n")
    return {"empty": empty, "noise": noise, "text": text,
            "truncated": truncated_png(folder / "truncated.png"),
            "bomb": bomb_png(folder / "bomb.png")}

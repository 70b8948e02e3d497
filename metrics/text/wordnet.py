"""A small reader of the WordNet 3.0 database files (Debian's `wordnet-base`), enough to
ask whether two words share a synset. Looked up lazily; no NLTK data download needed."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

DEFAULT_DIRS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/opt/homebrew/share/wordnet")
POS = ("noun", "verb", "adj", "adv")


def wordnet_dir() -> Path | None:
    candidates = [os.environ.get("WORDNET_DIR", ""), *DEFAULT_DIRS]
    for candidate in candidates:
        if candidate and (Path(candidate) / "index.noun").is_file():
            return Path(candidate)
    return None


class WordNet:
    """Synset offsets per lemma, read from the index.* files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._synsets: dict[str, set[str]] = {}
        for pos in POS:
            with (folder / f"index.{pos}").open(encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.startswith(" "):
                        continue  # licence header
                    fields = line.split()
                    count = int(fields[2])
                    offsets = fields[-count:]
                    self._synsets.setdefault(fields[0], set()).update(
                        f"{pos}:{offset}" for offset in offsets)

    def synsets(self, lemma: str) -> set[str]:
        return self._synsets.get(lemma.lower().replace(" ", "_"), set())

    def similar(self, a: str, b: str) -> bool:
        """Same lemma, or the two share at least one synset."""
        return a == b or bool(self.synsets(a) & self.synsets(b))


@cache
def load_wordnet() -> WordNet:
    folder = wordnet_dir()
    if folder is None:
        raise RuntimeError(
            "WordNet 3.0 database files not found: install Debian's wordnet-base "
            "(apt-get install wordnet-base) or set WORDNET_DIR to a folder with index.noun")
    return WordNet(folder)

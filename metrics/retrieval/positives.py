"""Positive sets for image-text retrieval: which captions are correct for an image, and
which images for a caption (many-to-many, as in ECCV Caption, Chun et al. 2022).

Ids. An id is an `int` when it is written as a canonical decimal integer (`391895`,
`"391895"`, `"-3"`) and a `str` otherwise (`"img-01"`, `"007"`, `"-0"`, `"1.5"`). `normalize_id`
applies this everywhere an id enters — positive sets, ranked lists, matrix id arrays — so
the JSON key `"391895"` and the list value `391895` of the `eccv-caption` files are the
same id, COCO ids stay the integers that package uses, and a thumb project's string keys
survive unchanged. `"007"` is not `7`: only the canonical spelling becomes an integer, so
no two distinct strings collapse into one id. Booleans, floats and empty strings are not
ids.

Files. The `eccv-caption` layout is a directory with exactly one `*_image_to_caption.json`
and one `*_caption_to_image.json`; each maps query id strings to lists of positive item ids
(integers in the package's files; strings allowed here for project ids). The two maps
are independent: each defines the queries of its direction (ECCV has 1,261 image queries
and 1,332 caption queries). Duplicate items are dropped (R counts distinct positives).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib.util import find_spec
from pathlib import Path
from types import MappingProxyType

import numpy as np

from metrics.retrieval.integer_lists import parse_integer_lists
from metrics.untrusted import load_json, regular_file
from rubrics.escape import forbidden_character, name_refusal, refusal

Id = int | str
IdMap = Mapping[Id, tuple[Id, ...]]

IMAGE_TO_CAPTION = "_image_to_caption.json"
CAPTION_TO_IMAGE = "_caption_to_image.json"
SHIPPED = {"eccv": "eccv", "cxc": "cxc", "coco-5k": "original"}
SHIPPED_NAMES = ("eccv", "cxc", "coco-5k", "coco-1k")
COCO_1K_FOLDS = 5

_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]*")
MAX_ID_DIGITS = 20  # an integer id: any 64-bit integer, signed or not
MAX_ID_CHARS = 20_000  # a string id (the import's limit on a text field)
# (and, like every imported text, no control, bidirectional-formatting or BOM character)
_ID_BOUND = 10**MAX_ID_DIGITS


class PositivesError(ValueError):
    """A positive-set file or value is unusable; the message names the file (and line)."""


def normalize_id(value: object) -> Id:
    """The one spelling of an id (see the module docstring); ValueError for a non-id, an
    integer of more than MAX_ID_DIGITS digits (a uint64 has 20), a string of more than
    MAX_ID_CHARS characters or one holding a character the import refuses (ESC, OSC 52's
    BEL, C1, NUL, a bidirectional override: `rubrics.escape.forbidden_character`). A
    canonical integer string of more digits stays a string."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"an id must be an integer or a string, not {shown(value)}")
    if isinstance(value, int):
        if not -_ID_BOUND < value < _ID_BOUND:
            raise ValueError(f"an integer id has at most {MAX_ID_DIGITS} digits")
        return value
    if not value:
        raise ValueError("an id must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"an id of {len(value):,} characters (at most {MAX_ID_CHARS:,})")
    if (character := forbidden_character(value)) is not None:
        raise ValueError(refusal(character))
    if len(value) - value.startswith("-") <= MAX_ID_DIGITS and _CANONICAL_INT.fullmatch(value):
        return int(value)
    return value  # longer digit strings stay text: no id ever needs a big integer


def shown(value: object, width: int = 60) -> str:
    """`repr(value)` for a message, cut to `width` characters; a list or an object is
    named, not printed (it may be large, or nested too deep to print)."""
    if isinstance(value, list | tuple | dict | set | np.ndarray):
        return {dict: "an object"}.get(type(value), "a list")
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 1]}…"


@dataclass(frozen=True)
class PositiveSet:
    """A named set of positives in both directions.

    `images` / `captions`, when set, restrict every ranking to those items before it is
    scored (a COCO 1K fold); None scores rankings as given. Build one from untrusted data
    with `positive_set` or `positive_set_from_pairs`, which normalise ids and drop
    duplicates."""

    name: str
    image_to_captions: IdMap
    caption_to_images: IdMap
    images: frozenset[Id] | None = field(default=None, compare=False)
    captions: frozenset[Id] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a positive set needs a name")

    def direction(self, direction: str) -> IdMap:
        """The query → positives map of `i2t` or `t2i`."""
        if direction == "i2t":
            return self.image_to_captions
        if direction == "t2i":
            return self.caption_to_images
        raise ValueError(f"direction must be 'i2t' or 't2i', not {direction!r}")

    def restriction(self, direction: str) -> frozenset[Id] | None:
        """The items a ranking of `direction` is filtered to (None: no filter)."""
        return self.captions if direction == "i2t" else self.images

    @cached_property
    def size(self) -> dict[str, int]:
        """Queries and (query, positive) pairs per direction, for summaries."""
        return {
            "i2t_queries": len(self.image_to_captions),
            "i2t_pairs": sum(map(len, self.image_to_captions.values())),
            "t2i_queries": len(self.caption_to_images),
            "t2i_pairs": sum(map(len, self.caption_to_images.values())),
        }


class _BadQuery(ValueError):
    """A problem with one query's entry; `key` is the query as written."""

    def __init__(self, key: object, message: str) -> None:
        super().__init__(message)
        self.key = key


def _normalized_map(raw: Mapping[object, Iterable[object]], what: str) -> IdMap:
    interned: dict[Id, Id] = {}
    result: dict[Id, tuple[Id, ...]] = {}
    for key, values in raw.items():
        try:
            query = normalize_id(key)
            items = list(values)
            plain = all(type(item) is int for item in items)  # plain ints are ids as they are
            if not plain:
                items = [normalize_id(item) for item in items]
            elif items and not -_ID_BOUND < min(items) <= max(items) < _ID_BOUND:
                raise ValueError(f"an integer id has at most {MAX_ID_DIGITS} digits")
        except (ValueError, TypeError) as error:
            raise _BadQuery(key, f"{what} {shown(key)}: {error}") from None
        if query in result:
            raise _BadQuery(key, f"{what} {shown(key)} appears twice (as {shown(query)})")
        distinct = tuple(dict.fromkeys(items))
        result[query] = distinct if plain else tuple(interned.setdefault(item, item)
                                                     for item in distinct)
    return MappingProxyType(result)


def positive_set(
    name: str,
    image_to_captions: Mapping[object, Iterable[object]],
    caption_to_images: Mapping[object, Iterable[object]],
) -> PositiveSet:
    """A PositiveSet from two maps of raw ids (normalised, duplicates dropped)."""
    return PositiveSet(
        name,
        _normalized_map(image_to_captions, "image"),
        _normalized_map(caption_to_images, "caption"),
    )


def positive_set_from_pairs(name: str, pairs: Iterable[tuple[object, object]]) -> PositiveSet:
    """A symmetric PositiveSet from (image id, caption id) pairs: each pair is a positive
    in both directions (e.g. a project's original captions, or verified matches)."""
    image_to_captions: dict[object, list[object]] = {}
    caption_to_images: dict[object, list[object]] = {}
    for image, caption in pairs:
        image_to_captions.setdefault(image, []).append(caption)
        caption_to_images.setdefault(caption, []).append(image)
    return positive_set(name, image_to_captions, caption_to_images)


def line_of_key(text: str, key: str) -> int:
    """The line where `"key"` first appears as a JSON key (1 if it cannot be found), as
    written or with JSON's escapes (`"a\\u001bb"` for a key holding ESC)."""
    for spelling in dict.fromkeys((key, json.dumps(key)[1:-1],
                                   json.dumps(key, ensure_ascii=False)[1:-1])):
        found = re.search(r'"' + re.escape(spelling) + r'"\s*:', text)
        if found:
            return text.count("\n", 0, found.start()) + 1
    return 1


def read_id_map(path: Path) -> dict[Id, tuple[Id, ...]]:
    """One `{query id: [item ids…]}` JSON file, ids normalised; PositivesError names the
    file and line of the first problem. Integer ids (the shipped sets) take the
    vectorised reader."""
    path = regular_file(path, PositivesError)
    try:
        data = path.read_bytes()
        parsed = parse_integer_lists(data)
        if parsed is not None and parsed.distinct_keys():
            return {key: tuple(dict.fromkeys(items))
                    for key, items in zip(parsed.keys.tolist(), parsed.lists(), strict=True)}
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PositivesError(f"{path}: cannot read: {error}") from None
    try:  # flat: every value must be a list of ids (below), so no deeper than 2 levels
        raw = load_json(text, path, PositivesError, flat=True, integers=False,
                        object_pairs_hook=_refuse_duplicate_keys)
    except _DuplicateKey as duplicate:
        raise PositivesError(
            f"{path}:{line_of_key(text, duplicate.key)}: key {shown(duplicate.key)} appears "
            "twice"
        ) from None
    if not isinstance(raw, dict):
        raise PositivesError(f"{path}:1: expected a JSON object {{query id: [item ids…]}}")
    for key, values in raw.items():
        if not isinstance(values, list):
            raise PositivesError(f"{path}:{line_of_key(text, key)}: the value of "
                                 f"{shown(key)} must be a list of ids")
    try:
        return dict(_normalized_map(raw, "query"))
    except _BadQuery as error:
        raise PositivesError(f"{path}:{line_of_key(text, str(error.key))}: {error}") from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def positive_files(directory: Path) -> tuple[Path, Path]:
    """The (image→caption, caption→image) files of an eccv-caption layout directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise PositivesError(f"{directory}: not a directory of positives")
    found = []
    for suffix in (IMAGE_TO_CAPTION, CAPTION_TO_IMAGE):
        matches = sorted(directory.glob(f"*{suffix}"))
        if len(matches) != 1:
            listed = ", ".join(m.name for m in matches) or "none"
            raise PositivesError(
                f"{directory}: expected exactly one *{suffix} file, found {listed}"
            )
        found.append(matches[0])
    return found[0], found[1]


def read_positive_dir(directory: Path, name: str | None = None) -> PositiveSet:
    """A positive set in the eccv-caption layout. Its name defaults to the files' common
    prefix (`eccv` for `eccv_image_to_caption.json`), else the directory's name."""
    image_file, caption_file = positive_files(directory)
    if name is None:
        prefix = image_file.name.removesuffix(IMAGE_TO_CAPTION)
        same = prefix == caption_file.name.removesuffix(CAPTION_TO_IMAGE)
        name, source = ((prefix, "the file prefix") if same and prefix
                        else (Path(directory).resolve().name, "the folder's name"))
    else:
        source = "the positive set's name"
    # the name is stored and shown (tables, the τ plot) and names the set's files: a name
    problem = name_refusal(name, in_file_names=True)
    if problem is not None:
        raise PositivesError(f"{directory}: {source} {shown(name)}: {problem}")
    return PositiveSet(
        name,
        MappingProxyType(read_id_map(image_file)),
        MappingProxyType(read_id_map(caption_file)),
    )


def write_positive_dir(positives: PositiveSet, directory: Path, prefix: str | None = None) -> None:
    """Write `positives` in the eccv-caption layout (`PREFIX_image_to_caption.json` and
    `PREFIX_caption_to_image.json`; prefix defaults to the set's name). Refuses a
    directory that already holds files of another prefix (it would become unreadable)."""
    directory = Path(directory)
    prefix = prefix or positives.name
    if "/" in prefix or not prefix.strip():
        raise ValueError(f"unusable file prefix {prefix!r}")
    directory.mkdir(parents=True, exist_ok=True)
    targets = (directory / f"{prefix}{IMAGE_TO_CAPTION}", directory / f"{prefix}{CAPTION_TO_IMAGE}")
    for suffix, target in zip((IMAGE_TO_CAPTION, CAPTION_TO_IMAGE), targets, strict=True):
        others = [p for p in directory.glob(f"*{suffix}") if p != target]
        if others:
            raise PositivesError(f"{directory}: already holds {others[0].name}")
    for mapping, target in zip(
        (positives.image_to_captions, positives.caption_to_images), targets, strict=True
    ):
        payload = {str(query): list(items) for query, items in mapping.items()}
        target.write_text(json.dumps(payload), encoding="utf-8")


def _shipped_data_dir() -> Path | None:
    spec = find_spec("eccv_caption")
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    return data if data.is_dir() else None


def eccv_caption_available() -> bool:
    """Whether the `eccv-caption` package (and its positive files) is installed."""
    return _shipped_data_dir() is not None


def _require_shipped() -> Path:
    data = _shipped_data_dir()
    if data is None:
        raise PositivesError(
            "the eccv-caption package is not installed (pip install eccv-caption): "
            "it ships the ECCV, CxC and COCO positive sets"
        )
    return data


def coco_test_ids() -> list[int]:
    """The 25,000 COCO 5K test caption ids, in the package's order (defines the 1K folds)."""
    return [int(i) for i in np.load(_require_shipped() / "coco_test_ids.npy",
                                    allow_pickle=False)]


@cache
def shipped_positive_set(name: str) -> PositiveSet:
    """`eccv`, `cxc` or `coco-5k` (the original COCO captions) from eccv-caption, read once
    per process (a set is immutable)."""
    if name not in SHIPPED:
        raise PositivesError(f"unknown shipped positive set {name!r}; known: {', '.join(SHIPPED)}")
    data = _require_shipped()
    stem = SHIPPED[name]
    return PositiveSet(
        name,
        MappingProxyType(read_id_map(data / f"{stem}{IMAGE_TO_CAPTION}")),
        MappingProxyType(read_id_map(data / f"{stem}{CAPTION_TO_IMAGE}")),
    )


def coco_1k_folds(coco: PositiveSet | None = None) -> tuple[PositiveSet, ...]:
    """The five COCO 1K folds as eccv-caption defines them: fold f holds the captions
    `coco_test_ids[5000f : 5000(f+1)]` and the images of their first positive; each
    query keeps all of its COCO positives; rankings are filtered to the fold's items."""
    coco = coco or shipped_positive_set("coco-5k")
    caption_ids = coco_test_ids()
    size = len(caption_ids) // COCO_1K_FOLDS
    folds = []
    for fold in range(COCO_1K_FOLDS):
        captions = caption_ids[fold * size : (fold + 1) * size]
        images = list(dict.fromkeys(coco.caption_to_images[c][0] for c in captions))
        folds.append(
            PositiveSet(
                f"coco-1k/fold{fold}",
                MappingProxyType({i: coco.image_to_captions[i] for i in images}),
                MappingProxyType({c: coco.caption_to_images[c] for c in captions}),
                images=frozenset(images),
                captions=frozenset(captions),
            )
        )
    return tuple(folds)


def shipped_positive_sets(name: str) -> tuple[PositiveSet, ...]:
    """A shipped set as the folds it is averaged over: five for `coco-1k`, else one."""
    if name == "coco-1k":
        return coco_1k_folds()
    return (shipped_positive_set(name),)


# --- plausible matches (ECCV Caption's PMRP) -------------------------------------------

COCO_CLASSES = 80


def read_coco_presence(path: Path) -> dict[int, np.ndarray]:
    """Each image's 80-class presence vector from a COCO instances file (`images`,
    `categories`, `annotations`); images without annotations get all zeros. Ids must be
    JSON integers (not true, 1.5 or "7"), of at most MAX_ID_DIGITS digits."""
    path = regular_file(path, PositivesError)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PositivesError(f"{path}: cannot read: {error}") from None
    data = load_json(text, path, PositivesError, integers=False, reals=False)  # only ids are read
    if not isinstance(data, dict) or not all(
            isinstance(data.get(key), list) for key in ("images", "categories", "annotations")):
        raise PositivesError(f"{path}: not a COCO instances file (needs lists 'images', "
                             "'categories' and 'annotations')")
    try:
        categories = sorted(_coco_id(c, "id") for c in data["categories"])
        column = {category: index for index, category in enumerate(categories)}
        presence = {_coco_id(image, "id"): np.zeros(len(categories), dtype=bool)
                    for image in data["images"]}
        for annotation in data["annotations"]:
            image, category = _coco_id(annotation, "image_id"), _coco_id(annotation,
                                                                         "category_id")
            if image not in presence:
                raise ValueError(f"an annotation names image {image}, which is not listed")
            if category not in column:
                raise ValueError(f"an annotation names category {category}, which is not "
                                 "listed")
            presence[image][column[category]] = True
    except ValueError as error:
        raise PositivesError(f"{path}: {error}") from None
    if len(categories) != COCO_CLASSES:
        raise PositivesError(f"{path}: expected {COCO_CLASSES} categories, found "
                             f"{len(categories)}")
    return presence


def _coco_id(entry: object, field: str) -> int:
    """`entry[field]` when it is a JSON integer id, else ValueError."""
    value = entry.get(field) if isinstance(entry, dict) else None
    if type(value) is not int:
        what = "an entry that is not an object" if not isinstance(entry, dict) else (
            f"an entry without {field!r}" if value is None else
            f"{field!r} {shown(value)}, not an integer")
        raise ValueError(f"{what} (ids are integers)")
    return normalize_id(value)


def plausible_matches(presence: Mapping[Id, np.ndarray], caption_images: IdMap, zeta: int,
                      *, name: str = "pm") -> PositiveSet:
    """ECCV Caption's plausible matches: an image and a caption match when the caption's
    image (its first positive in `caption_images`) and the image have class-presence
    vectors that differ in at most ζ positions. Queries are the images of `presence`
    that some caption names, and the captions whose image has a vector."""
    if zeta < 0:
        raise ValueError("ζ must be non-negative")
    captions = [c for c, images in caption_images.items() if images and images[0] in presence]
    caption_image = [caption_images[c][0] for c in captions]
    images = list(dict.fromkeys(caption_image))
    vectors = np.array([presence[i] for i in images], dtype=np.int32).reshape(len(images), -1)
    # Hamming distance of 0/1 vectors, |a| + |b| - 2 a·b: one product, not an (n, n, 80)
    # array (2 GB for the COCO 5K test split's 5,000 images)
    sizes = vectors.sum(axis=1)
    distance = sizes[:, None] + sizes[None, :] - 2 * (vectors @ vectors.T)
    image_index = {image: index for index, image in enumerate(images)}
    caption_of_image: dict[int, list[Id]] = {}
    for caption, image in zip(captions, caption_image, strict=True):
        caption_of_image.setdefault(image_index[image], []).append(caption)
    close = [np.nonzero(row <= zeta)[0] for row in distance]
    image_to_captions = {
        image: tuple(c for j in close[i] for c in caption_of_image.get(int(j), ()))
        for i, image in enumerate(images)}
    caption_to_images = {
        caption: tuple(images[j] for j in close[image_index[image]])
        for caption, image in zip(captions, caption_image, strict=True)}
    return PositiveSet(name, MappingProxyType(image_to_captions),
                       MappingProxyType(caption_to_images))

"""SQLModel tables. Valid values are enforced by the database itself (CHECKs, foreign keys)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    ForeignKeyConstraint,
    LargeBinary,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

from storage.stages import RATING_VALUE_FIELDS as RATING_VALUE_FIELDS
from storage.stages import Stage as Stage


def utcnow() -> datetime:
    return datetime.now(UTC)


def _timestamp(**kwargs: object) -> Field:
    return Field(
        default_factory=utcnow,
        sa_column=Column(DateTime(timezone=True), nullable=False, **kwargs),
    )


class Image(SQLModel, table=True):
    """An image to caption. `key` is the project's own id (THUMB: the COCO image id)."""

    __table_args__ = (CheckConstraint("length(key) > 0", name="image_key_not_empty"),)

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(unique=True, index=True)
    path: str | None = None
    set_id: int | None = Field(default=None, description="index in the evaluation split")
    double_rating: bool = Field(default=False, description="gets two blind stage-1 ratings")


class Caption(SQLModel, table=True):
    """A caption of an image by one system. The system is never shown to annotators."""

    __table_args__ = (
        UniqueConstraint("image_id", "system", name="caption_one_per_system"),
        CheckConstraint("length(system) > 0", name="caption_system_not_empty"),
        CheckConstraint("length(text) > 0", name="caption_text_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of caption_one_per_system (0013)
    image_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    system: str
    text: str
    external_id: str | None = Field(default=None, unique=True)
    # the caption's place in the order the imports gave the captions (0017): what the
    # exports, frames and queues list them by, since the id is drawn at random (a team's
    # annotators read ids, never this column)
    import_order: int | None = Field(default=None, index=True)


class ImageReference(SQLModel, table=True):
    """A reference caption of an image, used by reference-based metrics."""

    __tablename__ = "image_reference"
    __table_args__ = (
        UniqueConstraint("image_id", "position", name="reference_position_unique"),
        CheckConstraint("position >= 0", name="reference_position_non_negative"),
        CheckConstraint("length(text) > 0", name="reference_text_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of reference_position_unique (0013)
    image_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    position: int
    text: str


class Annotator(SQLModel, table=True):
    __table_args__ = (CheckConstraint("length(name) > 0", name="annotator_name_not_empty"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    native_english: bool | None = None
    created_at: datetime = _timestamp()
    # set by `thumb annotator retire`: no new claims, their work and history stay
    retired_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True))


class RatingValues(SQLModel):
    """The values a rating holds (scores, penalties with their error types, note, time, the
    rubric they are on): one definition for a rating and a gold answer, whose triggers
    check them against the rubric alike."""

    precision: int | None = None
    recall: int | None = None
    fluency: float = 0.0
    fluency_type: str | None = None
    conciseness: float = 0.0
    conciseness_type: str | None = None
    inclusive: float = 0.0
    inclusive_type: str | None = None
    note: str = ""
    seconds: float = 0.0
    rubric: str = Field(description="rubric id and version, e.g. thumb-1.0")
    # a Column object belongs to one table: these are made anew for each subclass
    created_at: datetime = Field(default_factory=utcnow, sa_type=DateTime(timezone=True),
                                 nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=DateTime(timezone=True),
                                 nullable=False)


def _rating_constraints(table: str) -> tuple[CheckConstraint | ForeignKeyConstraint, ...]:
    """A rating's checks (its stage, its seconds, a registered rubric), named for `table`:
    one declaration for `rating` and `released_rating`, which holds ratings moved out of
    it (a constraint object belongs to one table, so each gets its own)."""
    return (
        CheckConstraint("stage IN (1, 2, 3)", name=f"{table}_stage_valid"),
        CheckConstraint("seconds >= 0", name=f"{table}_seconds_non_negative"),
        ForeignKeyConstraint(["rubric"], ["rubric.signature"], name=f"{table}_rubric_fkey",
                             ondelete="RESTRICT"),
    )


class Rating(RatingValues, table=True):
    """One annotator's scores of one caption at one stage. Scores stay NULL until set.
    Triggers (migration 0006) refuse values that the rating's rubric does not allow."""

    __table_args__ = (
        UniqueConstraint("caption_id", "annotator_id", "stage", name="rating_unique"),
        *_rating_constraints("rating"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of rating_unique (0013)
    caption_id: int = Field(foreign_key="caption.id", ondelete="RESTRICT")
    annotator_id: int = Field(foreign_key="annotator.id", index=True, ondelete="RESTRICT")
    stage: int


class ReleasedRating(RatingValues, table=True):
    """A rating that the lead's `thumb release --force` moved out of `rating`, every value
    as it was, so that no analysis, protocol rule or team policy counts it and no rating
    is lost: its own id there (`rating_id`; SQLite may give that id again to a later
    rating, so it is not unique here), the claim it was made under, when and by whom it
    was released. Its values passed the rating table's rubric triggers when written and
    are copied in the database, so it takes rating's CHECKs and foreign keys, no trigger."""

    __tablename__ = "released_rating"
    __table_args__ = (
        *_rating_constraints("released_rating"),
        CheckConstraint("length(released_by) > 0", name="released_rating_by_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    rating_id: int = Field(description="the rating's id in `rating`")
    caption_id: int = Field(foreign_key="caption.id", ondelete="RESTRICT")
    annotator_id: int = Field(foreign_key="annotator.id", ondelete="RESTRICT")
    stage: int
    assignment_id: int = Field(foreign_key="assignment.id", ondelete="RESTRICT",
                               description="the claim the rating was made under")
    released_at: datetime = _timestamp()
    released_by: str = Field(description="who released it, as the event log names actors")


class ImageFlag(SQLModel, table=True):
    """An annotator's report that an image cannot be rated (the file is broken or shows
    nothing usable), with the reason; the image leaves that annotator's way."""

    __tablename__ = "image_flag"
    __table_args__ = (
        UniqueConstraint("image_id", "annotator_id", name="image_flag_once"),
        CheckConstraint("length(reason) > 0", name="image_flag_reason_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of image_flag_once (0013)
    image_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    annotator_id: int = Field(foreign_key="annotator.id", ondelete="RESTRICT")
    reason: str
    created_at: datetime = _timestamp()


class RubricRecord(SQLModel, table=True):
    """A rubric that ratings in this database were made with: the parsed file as JSON, so
    that totals and reports read it from here. The most recently chosen one is the
    project's rubric for new ratings."""

    __tablename__ = "rubric"
    __table_args__ = (
        CheckConstraint("length(signature) > 0", name="rubric_signature_not_empty"),
    )

    signature: str = Field(primary_key=True, description="id and version, e.g. thumb-1.0")
    rubric_id: str
    version: str
    title: str
    definition: str = Field(description="the rubric file, parsed, as JSON")
    registered_at: datetime = _timestamp()
    chosen_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )


class RubricRange(SQLModel, table=True):
    """Values a rubric allows in one rating column, as a closed interval (a single level
    of a score is low = high). The triggers on rating and fluency_check read these."""

    __tablename__ = "rubric_range"
    __table_args__ = (
        UniqueConstraint("rubric", "field", "low", "high", name="rubric_range_unique"),
        CheckConstraint("field IN ('precision', 'recall', 'fluency', 'conciseness', "
                        "'inclusive')", name="rubric_range_field_valid"),
        CheckConstraint("low <= high", name="rubric_range_ordered"),
    )

    id: int | None = Field(default=None, primary_key=True)
    rubric: str = Field(foreign_key="rubric.signature", ondelete="RESTRICT")
    field: str
    low: float
    high: float


class Resolution(SQLModel, table=True):
    """Why a resolver settled a stage-1/stage-2 disagreement; the settled values are the
    resolver's final-stage rating of the caption."""

    __table_args__ = (CheckConstraint("length(reasons) > 0", name="resolution_has_reason"),)

    id: int | None = Field(default=None, primary_key=True)
    caption_id: int = Field(foreign_key="caption.id", unique=True, ondelete="RESTRICT")
    resolver_id: int = Field(foreign_key="annotator.id", ondelete="RESTRICT")
    reasons: str = Field(description="comma-separated reason codes from the rubric")
    note: str = ""
    created_at: datetime = _timestamp()


class FluencyCheck(SQLModel, table=True):
    """A native speaker's fluency verdict on a caption neither of whose raters was native;
    it sets the caption's final fluency penalty (THUMB section 2.1)."""

    __tablename__ = "fluency_check"
    __table_args__ = (
        ForeignKeyConstraint(["rubric"], ["rubric.signature"],
                             name="fluency_check_rubric_fkey", ondelete="RESTRICT"),
    )

    id: int | None = Field(default=None, primary_key=True)
    caption_id: int = Field(foreign_key="caption.id", unique=True, ondelete="RESTRICT")
    checker_id: int = Field(foreign_key="annotator.id", ondelete="RESTRICT")
    fluency: float
    fluency_type: str | None = None
    created_at: datetime = _timestamp()
    rubric: str = Field(description="the rubric whose fluency amounts apply")


class Event(SQLModel, table=True):
    """Append-only log of every change: who changed which field of which row, and when."""

    __tablename__ = "event_log"
    __table_args__ = (CheckConstraint("length(actor) > 0", name="event_actor_not_empty"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _timestamp()
    actor: str
    action: str = Field(description="create, update, undo, import")
    table_name: str
    row_id: int | None = None
    field_name: str | None = None
    old_value: str | None = None
    new_value: str | None = None
    change_id: str | None = Field(default=None, index=True,
                                  description="events made by one action share it")
    reverts: str | None = Field(default=None, index=True,
                                description="for an undo: the change_id it reverts")
    os_login: str | None = Field(default=None, description="OS login of the process")
    db_role: str | None = Field(default=None,
                                description="PostgreSQL: the session's role, set by a trigger")


class Assignment(SQLModel, table=True):
    """One annotator's work on one image at one stage: the caption order they see (seeded
    shuffle), the time spent, and where they were, so a restart resumes there. At stages 1
    and 2 the row is also the annotator's claim on the image, held until `released_at`
    (set when they leave the image without having rated any of it)."""

    __table_args__ = (
        UniqueConstraint("image_id", "annotator_id", "stage", name="assignment_unique"),
        CheckConstraint("stage IN (1, 2, 3)", name="assignment_stage_valid"),
        CheckConstraint("seconds >= 0", name="assignment_seconds_non_negative"),
        CheckConstraint("focus >= 0", name="assignment_focus_non_negative"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of assignment_unique (0013)
    image_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    annotator_id: int = Field(foreign_key="annotator.id", index=True, ondelete="RESTRICT")
    stage: int
    shuffle_seed: int
    seconds: float = 0.0
    focus: int = 0
    last_viewed_at: datetime = _timestamp()
    released_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True))


class MetricScore(SQLModel, table=True):
    """An automatic metric's score of one caption, with the signature of the settings that
    produced it; the same signature is never computed twice. A score the metric cannot give
    (a reference-based metric for a caption whose image has no references) is stored as
    undefined: no value, and the reason."""

    __tablename__ = "metric_score"
    __table_args__ = (
        UniqueConstraint("caption_id", "signature", name="metric_score_unique"),
        CheckConstraint("length(metric) > 0", name="metric_score_metric_not_empty"),
        CheckConstraint("(value IS NULL) = (undefined IS NOT NULL)",
                        name="metric_score_value_or_reason"),
        CheckConstraint("undefined IS NULL OR length(undefined) > 0",
                        name="metric_score_reason_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of metric_score_unique (0013)
    caption_id: int = Field(foreign_key="caption.id", ondelete="RESTRICT")
    metric: str = Field(index=True)
    signature: str = Field(index=True)
    value: float | None = None
    undefined: str | None = None  # why there is no value, e.g. "no references"
    computed_at: datetime = _timestamp()


class BisonItem(SQLModel, table=True):
    """A BISON item (Hu et al. 2019): which of two similar images does the query describe?"""

    __tablename__ = "bison_item"
    __table_args__ = (
        CheckConstraint("image_a_id <> image_b_id", name="bison_two_images"),
        CheckConstraint("true_image_id IN (image_a_id, image_b_id)",
                        name="bison_true_image_is_a_candidate"),
        CheckConstraint("length(query) > 0", name="bison_query_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(unique=True, index=True, description="bison_id")
    query: str
    caption_key: str | None = None
    image_a_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    image_b_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    true_image_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")


class BisonAnswer(SQLModel, table=True):
    """An annotator's answer to a BISON item, with the left/right order they saw."""

    __tablename__ = "bison_answer"
    __table_args__ = (
        UniqueConstraint("item_id", "annotator_id", name="bison_answer_unique"),
        CheckConstraint("answer IS NULL OR answer IN ('left', 'right', 'both', 'neither')",
                        name="bison_answer_valid"),
        CheckConstraint("seconds >= 0", name="bison_answer_seconds"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of bison_answer_unique (0013)
    item_id: int = Field(foreign_key="bison_item.id", ondelete="RESTRICT")
    annotator_id: int = Field(foreign_key="annotator.id", index=True, ondelete="RESTRICT")
    left_image_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    answer: str | None = None
    seconds: float = 0.0
    created_at: datetime = _timestamp()
    updated_at: datetime = _timestamp()


class BisonPrediction(SQLModel, table=True):
    """A model's (or a caption-metric baseline's) choice for a BISON item."""

    __tablename__ = "bison_prediction"
    __table_args__ = (
        UniqueConstraint("item_id", "signature", name="bison_prediction_unique"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of bison_prediction_unique (0013)
    item_id: int = Field(foreign_key="bison_item.id", ondelete="RESTRICT")
    scorer: str
    signature: str = Field(index=True)
    score_a: float
    score_b: float
    chosen_image_id: int | None = Field(default=None, foreign_key="image.id",
                                        description="NULL when the scores tie")
    computed_at: datetime = _timestamp()


RETRIEVAL_METRICS = ("recall@k", "recall-share@k", "r-precision", "map@r", "pmrp", "rsum",
                     "sr@k", "ncs@k")


class RetrievalModel(SQLModel, table=True):
    """An evaluated image-text retrieval model: its name and the digest of the files that
    hold its rankings (the same files are never evaluated twice)."""

    __tablename__ = "retrieval_model"
    __table_args__ = (
        CheckConstraint("length(name) > 0", name="retrieval_model_name_not_empty"),
        CheckConstraint("source IN ('rankings', 'scores')", name="retrieval_model_source"),
        CheckConstraint("length(digest) > 0", name="retrieval_model_digest_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    source: str = Field(description="rankings (i2t and t2i JSON) or scores (a matrix)")
    digest: str = Field(description="sha256 of the files, e.g. i2t:<hex>|t2i:<hex>")
    files: str = Field(description="the file names as given, for people")
    created_at: datetime = _timestamp()


class RetrievalResult(SQLModel, table=True):
    """One metric of one model on one positive set (or relevance matrix) and direction,
    with its bootstrap CI and the signature of the settings that produced it."""

    __tablename__ = "retrieval_result"
    __table_args__ = (
        CheckConstraint("metric IN (" + ", ".join(f"'{m}'" for m in RETRIEVAL_METRICS) + ")",
                        name="retrieval_result_metric"),
        CheckConstraint("direction IN ('i2t', 't2i', 'mean', 'both')",
                        name="retrieval_result_direction"),
        CheckConstraint("k IS NULL OR k > 0", name="retrieval_result_k_positive"),
        CheckConstraint("m IS NULL OR m > 0", name="retrieval_result_m_positive"),
        CheckConstraint("value IS NULL OR (value >= 0 AND value <= 6)",
                        name="retrieval_result_value_range"),
        CheckConstraint("n >= 0", name="retrieval_result_n_non_negative"),
        CheckConstraint("length(positives) > 0", name="retrieval_result_positives_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    model_id: int = Field(foreign_key="retrieval_model.id", index=True, ondelete="RESTRICT")
    signature: str = Field(index=True)
    positives: str
    metric: str
    direction: str
    k: int | None = None
    m: int | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int
    computed_at: datetime = _timestamp()


JUDGMENT_KINDS = ("score", "pairwise")
JUDGMENT_CHOICES = ("a", "b", "tie")
# a score set's scale step -> what its scores are between min and max (0: continuous)
JUDGMENT_SCALE_STEPS = {1.0: "whole numbers", 0.5: "halves", 0.0: "continuous"}


class JudgmentSet(SQLModel, table=True):
    """Human judgments collected elsewhere (e.g. a published Likert or pairwise set), kept
    apart from THUMB ratings. A score set declares its scale: whole numbers (step 1),
    halves (0.5) or any real number in the range (step 0, continuous); a pairwise set has
    none."""

    __tablename__ = "judgment_set"
    __table_args__ = (
        CheckConstraint("length(name) > 0", name="judgment_set_name_not_empty"),
        CheckConstraint("kind IN ('score', 'pairwise')", name="judgment_set_kind_valid"),
        CheckConstraint(
            "(kind = 'score' AND scale_min IS NOT NULL AND scale_max > scale_min "
            "AND scale_step IN (0, 0.5, 1)) OR (kind = 'pairwise' AND scale_min IS NULL "
            "AND scale_max IS NULL AND scale_step IS NULL)",
            name="judgment_set_scale_valid",
        ),
        # targets of the composite foreign keys that tie judgments to their set's kind/scale
        UniqueConstraint("id", "kind", name="judgment_set_id_kind"),
        UniqueConstraint("id", "scale_min", "scale_max", "scale_step",
                         name="judgment_set_id_scale"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    kind: str
    scale_min: float | None = None
    scale_max: float | None = None
    scale_step: float | None = None
    source: str = Field(description="the file the judgments came from")
    references_source: str | None = Field(default=None,
                                          description="the file the references came from")
    created_at: datetime = _timestamp()


class JudgmentImage(SQLModel, table=True):
    """An image of a judgment set; the file is optional (text-only metrics need none)."""

    __tablename__ = "judgment_image"
    __table_args__ = (
        UniqueConstraint("set_id", "key", name="judgment_image_key_unique"),
        UniqueConstraint("id", "set_id", name="judgment_image_id_set"),
        CheckConstraint("length(key) > 0", name="judgment_image_key_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of judgment_image_key_unique (0013)
    set_id: int = Field(foreign_key="judgment_set.id", ondelete="RESTRICT")
    key: str
    path: str | None = None


class JudgmentReference(SQLModel, table=True):
    """A reference of a judged image; `external_id` is its id in the references file
    (`reference_id`, or a COCO annotation's `id`), which tells a caption with the same id
    that this reference is itself."""

    __tablename__ = "judgment_reference"
    __table_args__ = (
        UniqueConstraint("image_id", "position", name="judgment_reference_position_unique"),
        UniqueConstraint("image_id", "external_id", name="judgment_reference_id_unique"),
        CheckConstraint("position >= 0", name="judgment_reference_position_non_negative"),
        CheckConstraint("length(text) > 0", name="judgment_reference_text_not_empty"),
        CheckConstraint("external_id IS NULL OR length(external_id) > 0",
                        name="judgment_reference_id_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of judgment_reference_position_unique (0013)
    image_id: int = Field(foreign_key="judgment_image.id", ondelete="RESTRICT")
    position: int
    text: str
    external_id: str | None = None


class JudgmentCaption(SQLModel, table=True):
    """A judged caption: the unit is the (image, caption) pair, so one caption id (and
    text) may be judged under several images; the system is optional."""

    __tablename__ = "judgment_caption"
    __table_args__ = (
        ForeignKeyConstraint(["image_id", "set_id"], ["judgment_image.id", "judgment_image.set_id"],
                             ondelete="RESTRICT"),
        UniqueConstraint("set_id", "image_id", "external_id",
                         name="judgment_caption_id_per_image"),
        UniqueConstraint("id", "set_id", name="judgment_caption_id_set"),
        UniqueConstraint("id", "image_id", name="judgment_caption_id_image"),
        CheckConstraint("length(text) > 0", name="judgment_caption_text_not_empty"),
        CheckConstraint("system IS NULL OR length(system) > 0",
                        name="judgment_caption_system_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of judgment_caption_id_per_image (0013)
    set_id: int
    image_id: int = Field(index=True)
    text: str
    external_id: str | None = None
    system: str | None = None


class JudgmentScore(SQLModel, table=True):
    """One judge's score of a caption. The set's scale is repeated here so that the
    database itself refuses a score off the scale (composite key to the set's scale):
    within its range always, and a whole number or half unless the set is continuous
    (step 0)."""

    __tablename__ = "judgment_score"
    __table_args__ = (
        ForeignKeyConstraint(["caption_id", "set_id"],
                             ["judgment_caption.id", "judgment_caption.set_id"],
                             ondelete="RESTRICT"),
        ForeignKeyConstraint(
            ["set_id", "scale_min", "scale_max", "scale_step"],
            ["judgment_set.id", "judgment_set.scale_min", "judgment_set.scale_max",
             "judgment_set.scale_step"], ondelete="RESTRICT"),
        UniqueConstraint("caption_id", "judge", name="judgment_score_one_per_judge"),
        CheckConstraint("length(judge) > 0", name="judgment_score_judge_not_empty"),
        CheckConstraint(
            "score >= scale_min AND score <= scale_max AND (scale_step = 0 OR "
            "(score - scale_min) / NULLIF(scale_step, 0) = "
            "round((score - scale_min) / NULLIF(scale_step, 0)))",
            name="judgment_score_on_scale"),
    )

    id: int | None = Field(default=None, primary_key=True)
    set_id: int = Field(index=True)
    # indexed as the first column of judgment_score_one_per_judge (0013)
    caption_id: int
    judge: str
    score: float
    scale_min: float
    scale_max: float
    scale_step: float
    note: str = ""


class JudgmentPair(SQLModel, table=True):
    """One judge's choice between two captions of the same image: a, b or tie."""

    __tablename__ = "judgment_pair"
    __table_args__ = (
        ForeignKeyConstraint(["set_id", "kind"], ["judgment_set.id", "judgment_set.kind"],
                             ondelete="RESTRICT"),
        ForeignKeyConstraint(["image_id", "set_id"],
                             ["judgment_image.id", "judgment_image.set_id"],
                             ondelete="RESTRICT"),
        ForeignKeyConstraint(["caption_a_id", "image_id"],
                             ["judgment_caption.id", "judgment_caption.image_id"],
                             ondelete="RESTRICT"),
        ForeignKeyConstraint(["caption_b_id", "image_id"],
                             ["judgment_caption.id", "judgment_caption.image_id"],
                             ondelete="RESTRICT"),
        UniqueConstraint("caption_a_id", "caption_b_id", "judge",
                         name="judgment_pair_one_per_judge"),
        CheckConstraint("kind = 'pairwise'", name="judgment_pair_in_pairwise_set"),
        CheckConstraint("caption_a_id <> caption_b_id", name="judgment_pair_two_captions"),
        CheckConstraint("choice IN ('a', 'b', 'tie')", name="judgment_pair_choice_valid"),
        CheckConstraint("length(judge) > 0", name="judgment_pair_judge_not_empty"),
        CheckConstraint("category IS NULL OR length(category) > 0",
                        name="judgment_pair_category_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    set_id: int = Field(index=True)
    kind: str = "pairwise"
    image_id: int
    caption_a_id: int
    caption_b_id: int
    judge: str
    choice: str
    category: str | None = None


class JudgmentMetricScore(SQLModel, table=True):
    """An automatic metric's score of a judged caption, with its signature; undefined
    scores as in `MetricScore`."""

    __tablename__ = "judgment_metric_score"
    __table_args__ = (
        UniqueConstraint("caption_id", "signature", name="judgment_metric_score_unique"),
        CheckConstraint("length(metric) > 0", name="judgment_metric_score_metric_not_empty"),
        CheckConstraint("(value IS NULL) = (undefined IS NOT NULL)",
                        name="judgment_metric_score_value_or_reason"),
        CheckConstraint("undefined IS NULL OR length(undefined) > 0",
                        name="judgment_metric_score_reason_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of judgment_metric_score_unique (0013)
    caption_id: int = Field(foreign_key="judgment_caption.id", ondelete="RESTRICT")
    metric: str = Field(index=True)
    signature: str = Field(index=True)
    value: float | None = None
    undefined: str | None = None
    computed_at: datetime = _timestamp()


JUDGMENT_TABLES = (JudgmentSet, JudgmentImage, JudgmentReference, JudgmentCaption,
                   JudgmentScore, JudgmentPair, JudgmentMetricScore)


MATCH_DIRECTIONS = ("i2t", "t2i")


class MatchModel(SQLModel, table=True):
    """A retrieval model that proposed image-caption matches, with the settings it ran with.
    `top_lists` keeps its ranked lists to `depth` (query -> items, both directions, as a
    NumPy .npz) for gold negatives and for comparing models' rankings."""

    __tablename__ = "match_model"
    __table_args__ = (
        CheckConstraint("length(name) > 0", name="match_model_name_not_empty"),
        CheckConstraint("top_k >= 1", name="match_model_top_k_positive"),
        CheckConstraint("depth >= top_k", name="match_model_depth_covers_top_k"),
        CheckConstraint("direction IN ('i2t', 't2i', 'both')", name="match_model_direction"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    signature: str
    direction: str
    top_k: int
    depth: int
    queries_sample: int | None = None
    seed: int | None = None
    top_lists: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = _timestamp()


class MatchPair(SQLModel, table=True):
    """An image-caption pair that humans verify: a model's candidate or a gold item."""

    __tablename__ = "match_pair"
    __table_args__ = (UniqueConstraint("image_id", "caption_id", name="match_pair_unique"),)

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of match_pair_unique (0013)
    image_id: int = Field(foreign_key="image.id", ondelete="RESTRICT")
    caption_id: int = Field(foreign_key="caption.id", index=True, ondelete="RESTRICT")


class MatchProposal(SQLModel, table=True):
    """Which model proposed a pair, in which direction, at which rank (1 = best)."""

    __tablename__ = "match_proposal"
    __table_args__ = (
        UniqueConstraint("pair_id", "model_id", "direction", name="match_proposal_unique"),
        CheckConstraint("direction IN ('i2t', 't2i')", name="match_proposal_direction"),
        CheckConstraint("rank >= 1", name="match_proposal_rank_positive"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of match_proposal_unique (0013)
    pair_id: int = Field(foreign_key="match_pair.id", ondelete="RESTRICT")
    model_id: int = Field(foreign_key="match_model.id", index=True, ondelete="RESTRICT")
    direction: str
    rank: int


class MatchBatch(SQLModel, table=True):
    """Pairs verified together, with gold items; each is verified by `redundancy` people."""

    __tablename__ = "match_batch"
    __table_args__ = (CheckConstraint("redundancy >= 1", name="match_batch_redundancy"),)

    id: int | None = Field(default=None, primary_key=True)
    seed: int
    redundancy: int
    created_at: datetime = _timestamp()


class MatchBatchItem(SQLModel, table=True):
    """A pair in a batch; `gold` is 'positive' or 'negative' for a known answer, else NULL.
    Never shown to the annotator."""

    __tablename__ = "match_batch_item"
    __table_args__ = (
        UniqueConstraint("batch_id", "position", name="match_batch_item_position"),
        UniqueConstraint("batch_id", "pair_id", name="match_batch_item_pair"),
        CheckConstraint("position >= 0", name="match_batch_item_position_non_negative"),
        CheckConstraint("gold IS NULL OR gold IN ('positive', 'negative')",
                        name="match_batch_item_gold"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of match_batch_item_position (0013)
    batch_id: int = Field(foreign_key="match_batch.id", ondelete="RESTRICT")
    pair_id: int = Field(foreign_key="match_pair.id", index=True, ondelete="RESTRICT")
    position: int
    gold: str | None = None


class MatchClaim(SQLModel, table=True):
    """An annotator's claim on a batch: their order of its pairs and where they were.
    A rejected claim (after quality control) frees the batch for someone else and its
    answers leave the aggregation."""

    __tablename__ = "match_claim"
    __table_args__ = (
        UniqueConstraint("batch_id", "annotator_id", name="match_claim_unique"),
        CheckConstraint("status IN ('active', 'rejected')", name="match_claim_status"),
        CheckConstraint("focus >= 0", name="match_claim_focus_non_negative"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of match_claim_unique (0013)
    batch_id: int = Field(foreign_key="match_batch.id", ondelete="RESTRICT")
    annotator_id: int = Field(foreign_key="annotator.id", index=True, ondelete="RESTRICT")
    shuffle_seed: int
    status: str = "active"
    focus: int = 0
    claimed_at: datetime = _timestamp()


class MatchHold(SQLModel, table=True):
    """Which process verifies as an annotator: one at a time, so that an annotator has one
    batch open at once and no process overwrites another's answers. Taken in the locked
    transaction that resumes or claims the batch, checked in the transaction of every
    answer, given back when the session ends. A holder that is gone (on this machine: no
    process with its pid; anywhere: not seen for a while) is replaced."""

    __tablename__ = "match_hold"
    __table_args__ = (
        UniqueConstraint("annotator_id", name="match_hold_one_per_annotator"),
        CheckConstraint("length(token) > 0", name="match_hold_token_not_empty"),
        CheckConstraint("pid > 0", name="match_hold_pid_positive"),
    )

    id: int | None = Field(default=None, primary_key=True)
    annotator_id: int = Field(foreign_key="annotator.id", ondelete="RESTRICT")
    token: str = Field(description="the holding session's random id")
    host: str = Field(description="the machine the holding process runs on")
    pid: int = Field(description="the holding process's id on that machine")
    taken_at: datetime = _timestamp()
    seen_at: datetime = _timestamp()


class MatchVerification(SQLModel, table=True):
    """One annotator's answer on one pair of a claimed batch: 1 = 100% yes, 2 = partially
    yes, 3 = mostly no, 4 = 100% no (NULL after undoing a first answer)."""

    __tablename__ = "match_verification"
    __table_args__ = (
        UniqueConstraint("claim_id", "item_id", name="match_verification_unique"),
        CheckConstraint("answer IS NULL OR answer IN (1, 2, 3, 4)",
                        name="match_verification_answer"),
        CheckConstraint("seconds >= 0", name="match_verification_seconds"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of match_verification_unique (0013)
    claim_id: int = Field(foreign_key="match_claim.id", ondelete="RESTRICT")
    item_id: int = Field(foreign_key="match_batch_item.id", index=True, ondelete="RESTRICT")
    answer: int | None = None
    seconds: float = 0.0
    created_at: datetime = _timestamp()
    updated_at: datetime = _timestamp()


class PositiveSet(SQLModel, table=True):
    """A named set of image-caption positives (imported, or derived from verifications)."""

    __tablename__ = "positive_set"
    __table_args__ = (CheckConstraint("length(name) > 0", name="positive_set_name_not_empty"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True)
    source: str = Field(description="where it came from, with its settings")
    created_at: datetime = _timestamp()


class PositivePair(SQLModel, table=True):
    """One positive of a set, per direction as the eccv-caption layout keeps them: ids are
    strings and need not be in the project (a positive set is about ids)."""

    __tablename__ = "positive_pair"
    __table_args__ = (
        UniqueConstraint("set_id", "direction", "query_key", "item_key",
                         name="positive_pair_unique"),
        CheckConstraint("direction IN ('i2t', 't2i')", name="positive_pair_direction"),
        CheckConstraint("length(query_key) > 0 AND length(item_key) > 0",
                        name="positive_pair_keys_not_empty"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of positive_pair_unique (0013)
    set_id: int = Field(foreign_key="positive_set.id", ondelete="RESTRICT")
    direction: str
    query_key: str
    item_key: str


class SchemaVersion(SQLModel, table=True):
    """thumb-tui 0.1.0's own schema versioning, before Alembic (`alembic_version`) took
    over: revision 0002 writes version 2 here, so that 0.1.0 refuses an upgraded database."""

    __tablename__ = "schema_version"

    id: int | None = Field(default=None, primary_key=True)
    version: int
    applied_at: datetime = _timestamp()


# --- gold items: known answers seeded into stage 1 ------------------------------------
# Apart from image/caption/rating by construction: no analysis, report, export, status
# count or protocol rule reads these tables, so a gold item can never reach one.


class GoldSetting(SQLModel, table=True):
    """The project's one row of gold settings: the share of an annotator's stage-1 queue
    that is gold, and whether a failed gold item shows its reason after the image."""

    __tablename__ = "gold_setting"
    __table_args__ = (
        CheckConstraint("id = 1", name="gold_setting_one_row"),
        CheckConstraint("rate >= 0 AND rate <= 0.5", name="gold_setting_rate_range"),
    )

    id: int | None = Field(default=None, primary_key=True)
    rate: float = 0.1
    feedback: bool = False
    updated_at: datetime = _timestamp()


class GoldImage(SQLModel, table=True):
    """An image of the gold file: its own key (never a project image's) and file."""

    __tablename__ = "gold_image"
    __table_args__ = (CheckConstraint("length(key) > 0", name="gold_image_key_not_empty"),)

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(unique=True)
    path: str | None = None
    created_at: datetime = _timestamp()


class GoldCaption(SQLModel, table=True):
    """A gold caption with the answers that count as right: P and R within their ranges
    (levels of the rubric's scales; triggers of 0012 check them against `rubric_range`),
    each penalty at most its acceptable amount; and why, for the annotator who missed it."""

    __tablename__ = "gold_caption"
    __table_args__ = (
        UniqueConstraint("gold_image_id", "text", name="gold_caption_unique"),
        CheckConstraint("length(text) > 0", name="gold_caption_text_not_empty"),
        CheckConstraint("length(reason) > 0", name="gold_caption_reason_not_empty"),
        CheckConstraint("precision_min <= precision_max", name="gold_caption_precision_ordered"),
        CheckConstraint("recall_min <= recall_max", name="gold_caption_recall_ordered"),
        CheckConstraint("fluency_max >= 0 AND conciseness_max >= 0 AND inclusive_max >= 0",
                        name="gold_caption_penalties_non_negative"),
        ForeignKeyConstraint(["rubric"], ["rubric.signature"], name="gold_caption_rubric_fkey",
                             ondelete="RESTRICT"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of gold_caption_unique (0013)
    gold_image_id: int = Field(foreign_key="gold_image.id", ondelete="RESTRICT")
    text: str
    precision_min: int
    precision_max: int
    recall_min: int
    recall_max: int
    fluency_max: float = 0.0
    conciseness_max: float = 0.0
    inclusive_max: float = 0.0
    reason: str
    rubric: str = Field(description="the rubric whose scales the ranges are on")
    created_at: datetime = _timestamp()


class GoldAnswer(RatingValues, table=True):
    """An annotator's answer to a gold caption, with the values a rating would hold
    (triggers of 0012 check them against the answer's rubric like a rating's), and the
    scored values: those of the first moment it was complete (0014), which no later
    change replaces, so that going back after the feedback cannot raise the accuracy."""

    __tablename__ = "gold_answer"
    __table_args__ = (
        UniqueConstraint("gold_caption_id", "annotator_id", name="gold_answer_unique"),
        CheckConstraint("seconds >= 0", name="gold_answer_seconds_non_negative"),
        ForeignKeyConstraint(["rubric"], ["rubric.signature"], name="gold_answer_rubric_fkey",
                             ondelete="RESTRICT"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # indexed as the first column of gold_answer_unique (0013)
    gold_caption_id: int = Field(foreign_key="gold_caption.id", ondelete="RESTRICT")
    annotator_id: int = Field(foreign_key="annotator.id", index=True, ondelete="RESTRICT")
    first_precision: int | None = None
    first_recall: int | None = None
    first_fluency: float | None = None
    first_conciseness: float | None = None
    first_inclusive: float | None = None
    first_answered_at: datetime | None = Field(default=None,
                                               sa_type=DateTime(timezone=True))


GOLD_TABLES = (GoldSetting, GoldImage, GoldCaption, GoldAnswer)

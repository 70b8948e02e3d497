"""Drop the single-column indexes that a composite UNIQUE constraint of the same table
already gives. A constraint's index is ordered by its first column first, so SQLite and
PostgreSQL use it for any look-up (and foreign-key check) by that column alone; the
separate index only made every insert and update maintain a second copy (importing 10^6
captions spent ~7 s of its ~28 s inside SQLite on the first three below). Each index and
the constraint that covers it:

- ix_caption_image_id: caption_one_per_system (image_id, system)
- ix_image_reference_image_id: reference_position_unique (image_id, position)
- ix_rating_caption_id: rating_unique (caption_id, annotator_id, stage)
- ix_image_flag_image_id: image_flag_once (image_id, annotator_id)
- ix_assignment_image_id: assignment_unique (image_id, annotator_id, stage)
- ix_metric_score_caption_id: metric_score_unique (caption_id, signature)
- ix_bison_answer_item_id: bison_answer_unique (item_id, annotator_id)
- ix_bison_prediction_item_id: bison_prediction_unique (item_id, signature)
- ix_judgment_image_set_id: judgment_image_key_unique (set_id, key)
- ix_judgment_reference_image_id: judgment_reference_position_unique (image_id, position)
- ix_judgment_caption_set_id: judgment_caption_id_per_image (set_id, image_id,
  external_id)
- ix_judgment_score_caption_id: judgment_score_one_per_judge (caption_id, judge)
- ix_judgment_metric_score_caption_id: judgment_metric_score_unique (caption_id,
  signature)
- ix_match_pair_image_id: match_pair_unique (image_id, caption_id)
- ix_match_proposal_pair_id: match_proposal_unique (pair_id, model_id, direction)
- ix_match_batch_item_batch_id: match_batch_item_position (batch_id, position)
- ix_match_claim_batch_id: match_claim_unique (batch_id, annotator_id)
- ix_match_verification_claim_id: match_verification_unique (claim_id, item_id)
- ix_positive_pair_set_id: positive_pair_unique (set_id, direction, query_key, item_key)
- ix_gold_caption_gold_image_id: gold_caption_unique (gold_image_id, text)
- ix_gold_answer_gold_caption_id: gold_answer_unique (gold_caption_id, annotator_id)

An index on a column that leads no constraint (ix_rating_annotator_id) stays, and so do
the unique indexes (ix_image_key). No row changes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# (table, column) of each dropped index, named ix_<table>_<column> as the models named it
COVERED = (
    ("caption", "image_id"),
    ("image_reference", "image_id"),
    ("rating", "caption_id"),
    ("image_flag", "image_id"),
    ("assignment", "image_id"),
    ("metric_score", "caption_id"),
    ("bison_answer", "item_id"),
    ("bison_prediction", "item_id"),
    ("judgment_image", "set_id"),
    ("judgment_reference", "image_id"),
    ("judgment_caption", "set_id"),
    ("judgment_score", "caption_id"),
    ("judgment_metric_score", "caption_id"),
    ("match_pair", "image_id"),
    ("match_proposal", "pair_id"),
    ("match_batch_item", "batch_id"),
    ("match_claim", "batch_id"),
    ("match_verification", "claim_id"),
    ("positive_pair", "set_id"),
    ("gold_caption", "gold_image_id"),
    ("gold_answer", "gold_caption_id"),
)


def upgrade() -> None:
    for table, column in COVERED:
        # if_exists: an index already dropped by hand leaves the head schema all the same
        op.drop_index(f"ix_{table}_{column}", table_name=table, if_exists=True)


def downgrade() -> None:
    for table, column in COVERED:
        op.create_index(f"ix_{table}_{column}", table, [column], unique=False)

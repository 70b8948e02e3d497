"""Match verification (issue 16): models' proposals, batches with gold items, claims,
answers, and named positive sets.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "match_batch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("redundancy", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("redundancy >= 1", name="match_batch_redundancy"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "match_model",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("signature", sa.String(), nullable=False),
        sa.Column("direction", sa.String(), nullable=False),
        sa.Column("top_k", sa.Integer(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("queries_sample", sa.Integer(), nullable=True),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("top_lists", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("direction IN ('i2t', 't2i', 'both')", name="match_model_direction"),
        sa.CheckConstraint("depth >= top_k", name="match_model_depth_covers_top_k"),
        sa.CheckConstraint("length(name) > 0", name="match_model_name_not_empty"),
        sa.CheckConstraint("top_k >= 1", name="match_model_top_k_positive"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_match_model_name"), "match_model", ["name"], unique=True)
    op.create_table(
        "positive_set",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(name) > 0", name="positive_set_name_not_empty"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_positive_set_name"), "positive_set", ["name"], unique=True)
    op.create_table(
        "match_claim",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("shuffle_seed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("focus", sa.Integer(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("status IN ('active', 'rejected')", name="match_claim_status"),
        sa.CheckConstraint("focus >= 0", name="match_claim_focus_non_negative"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["batch_id"], ["match_batch.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("batch_id", "annotator_id", name="match_claim_unique"),
    )
    op.create_index(
        op.f("ix_match_claim_annotator_id"), "match_claim", ["annotator_id"], unique=False
    )
    op.create_index(op.f("ix_match_claim_batch_id"), "match_claim", ["batch_id"], unique=False)
    op.create_table(
        "positive_pair",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("direction", sa.String(), nullable=False),
        sa.Column("query_key", sa.String(), nullable=False),
        sa.Column("item_key", sa.String(), nullable=False),
        sa.CheckConstraint("direction IN ('i2t', 't2i')", name="positive_pair_direction"),
        sa.CheckConstraint(
            "length(query_key) > 0 AND length(item_key) > 0", name="positive_pair_keys_not_empty"
        ),
        sa.ForeignKeyConstraint(["set_id"], ["positive_set.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "set_id", "direction", "query_key", "item_key", name="positive_pair_unique"
        ),
    )
    op.create_index(op.f("ix_positive_pair_set_id"), "positive_pair", ["set_id"], unique=False)
    op.create_table(
        "match_pair",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=False),
        sa.Column("caption_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["caption_id"], ["caption.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["image_id"], ["image.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("image_id", "caption_id", name="match_pair_unique"),
    )
    op.create_index(op.f("ix_match_pair_caption_id"), "match_pair", ["caption_id"], unique=False)
    op.create_index(op.f("ix_match_pair_image_id"), "match_pair", ["image_id"], unique=False)
    op.create_table(
        "match_batch_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("pair_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("gold", sa.String(), nullable=True),
        sa.CheckConstraint(
            "gold IS NULL OR gold IN ('positive', 'negative')", name="match_batch_item_gold"
        ),
        sa.CheckConstraint("position >= 0", name="match_batch_item_position_non_negative"),
        sa.ForeignKeyConstraint(["batch_id"], ["match_batch.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["pair_id"], ["match_pair.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("batch_id", "pair_id", name="match_batch_item_pair"),
        sa.UniqueConstraint("batch_id", "position", name="match_batch_item_position"),
    )
    op.create_index(
        op.f("ix_match_batch_item_batch_id"), "match_batch_item", ["batch_id"], unique=False
    )
    op.create_index(
        op.f("ix_match_batch_item_pair_id"), "match_batch_item", ["pair_id"], unique=False
    )
    op.create_table(
        "match_proposal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pair_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("direction", sa.String(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.CheckConstraint("direction IN ('i2t', 't2i')", name="match_proposal_direction"),
        sa.CheckConstraint("rank >= 1", name="match_proposal_rank_positive"),
        sa.ForeignKeyConstraint(["model_id"], ["match_model.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["pair_id"], ["match_pair.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("pair_id", "model_id", "direction", name="match_proposal_unique"),
    )
    op.create_index(
        op.f("ix_match_proposal_model_id"), "match_proposal", ["model_id"], unique=False
    )
    op.create_index(op.f("ix_match_proposal_pair_id"), "match_proposal", ["pair_id"], unique=False)
    op.create_table(
        "match_verification",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("claim_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("answer", sa.Integer(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "answer IS NULL OR answer IN (1, 2, 3, 4)", name="match_verification_answer"
        ),
        sa.CheckConstraint("seconds >= 0", name="match_verification_seconds"),
        sa.ForeignKeyConstraint(["claim_id"], ["match_claim.id"], ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["item_id"], ["match_batch_item.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("claim_id", "item_id", name="match_verification_unique"),
    )
    op.create_index(
        op.f("ix_match_verification_claim_id"), "match_verification", ["claim_id"], unique=False
    )
    op.create_index(
        op.f("ix_match_verification_item_id"), "match_verification", ["item_id"], unique=False
    )

"""forgetting runs and archive restores

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "archive_restores",
        sa.Column("archive_key", sa.String(length=96), nullable=False),
        sa.Column("restored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "new_chunk_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.PrimaryKeyConstraint("archive_key", name=op.f("pk_archive_restores")),
    )
    op.create_table(
        "forgetting_runs",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("n_candidates", sa.Integer(), nullable=False),
        sa.Column("n_archived", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_forgetting_runs")),
    )


def downgrade() -> None:
    op.drop_table("forgetting_runs")
    op.drop_table("archive_restores")

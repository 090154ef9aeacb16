"""chunk_changes: every change made to a chunk's memory fields or a document's deletion

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chunk_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("space", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=16), nullable=False),
        sa.Column("doc_id", sa.String(length=64), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=True),
        sa.Column("field", sa.String(length=32), nullable=False),
        sa.Column("before", sa.Text(), nullable=True),
        sa.Column("after", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chunk_changes")),
    )
    op.create_index("ix_chunk_changes_space", "chunk_changes", ["space"], unique=False)
    op.create_index("ix_chunk_changes_doc", "chunk_changes", ["doc_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_chunk_changes_doc", table_name="chunk_changes")
    op.drop_index("ix_chunk_changes_space", table_name="chunk_changes")
    op.drop_table("chunk_changes")

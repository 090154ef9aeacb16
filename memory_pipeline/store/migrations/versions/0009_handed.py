"""handed: what the memory gave an agent (recall blocks, MCP searches), per space

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "handed",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("space", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("session", sa.String(length=256), nullable=True),
        sa.Column("query", sa.Text(), nullable=True),
        sa.Column("block", sa.Text(), nullable=True),
        sa.Column("hits", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_handed")),
    )
    op.create_index("ix_handed_space", "handed", ["space"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_handed_space", table_name="handed")
    op.drop_table("handed")

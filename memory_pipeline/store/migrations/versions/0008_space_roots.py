"""space roots: the project roots whose sessions were captured into each space

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "space_roots",
        sa.Column("space", sa.String(length=64), nullable=False),
        sa.Column("root", sa.String(length=4096), nullable=False),
        sa.Column("last_capture_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("space", "root", name=op.f("pk_space_roots")),
    )


def downgrade() -> None:
    op.drop_table("space_roots")

"""chunk_changes.review: a person's verdict on an agent's change (accepted, reverted)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chunk_changes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("review", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunk_changes", schema=None) as batch_op:
        batch_op.drop_column("reviewed_at")
        batch_op.drop_column("review")

"""memory spaces: every document and chunk belongs to one (existing rows: default)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("documents", "chunks"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(
                sa.Column("space", sa.String(length=64), nullable=False, server_default="default")
            )
            batch_op.create_index(batch_op.f(f"ix_{table}_space"), ["space"], unique=False)


def downgrade() -> None:
    for table in ("documents", "chunks"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_index(batch_op.f(f"ix_{table}_space"))
            batch_op.drop_column("space")

"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("doc_id", sa.String(length=64), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("fmt", sa.String(length=16), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("normalized_hash", sa.String(length=64), nullable=False),
        sa.Column("byte_size", sa.BigInteger(), nullable=False),
        sa.Column("knowledge_type", sa.String(length=16), nullable=True),
        sa.Column("importance", sa.Float(), nullable=True),
        sa.Column("source_date", sa.Date(), nullable=True),
        sa.Column("source_date_rule", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("n_chunks", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("doc_id", name=op.f("pk_documents")),
    )
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_documents_normalized_hash"), ["normalized_hash"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_documents_source"), ["source"], unique=False)

    op.create_table(
        "index_changes",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("chunk_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("op", sa.String(length=8), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_index_changes")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("index_changes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_index_changes_chunk_id"), ["chunk_id"], unique=False)

    op.create_table(
        "index_versions",
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.String(length=256), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("n_dense", sa.Integer(), nullable=False),
        sa.Column("n_sparse", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("added", sa.Integer(), nullable=False),
        sa.Column("removed", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("version", name=op.f("pk_index_versions")),
    )
    op.create_table(
        "chunks",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("doc_id", sa.String(length=64), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_sha", sa.String(length=64), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("knowledge_type", sa.String(length=16), nullable=True),
        sa.Column("importance", sa.Float(), nullable=True),
        sa.Column("access_count", sa.Integer(), nullable=False),
        sa.Column("last_accessed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source_date", sa.Date(), nullable=True),
        sa.ForeignKeyConstraint(
            ["doc_id"],
            ["documents.doc_id"],
            name=op.f("fk_chunks_doc_id_documents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chunks")),
        sa.UniqueConstraint("doc_id", "chunk_index", name="uq_chunks_doc_id_chunk_index"),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_chunks_content_sha"), ["content_sha"], unique=False)
        batch_op.create_index(batch_op.f("ix_chunks_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_chunks_doc_id"), ["doc_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_chunks_knowledge_type"), ["knowledge_type"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_chunks_source_date"), ["source_date"], unique=False)

    op.create_table(
        "chunk_tags",
        sa.Column("chunk_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("tag", sa.String(length=512), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
            name=op.f("fk_chunk_tags_chunk_id_chunks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chunk_id", "tag", name=op.f("pk_chunk_tags")),
    )
    with op.batch_alter_table("chunk_tags", schema=None) as batch_op:
        batch_op.create_index("ix_chunk_tags_tag", ["tag"], unique=False)

    op.create_table(
        "embeddings",
        sa.Column("chunk_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("model_id", sa.String(length=256), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
            name=op.f("fk_embeddings_chunk_id_chunks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chunk_id", "model_id", name=op.f("pk_embeddings")),
    )


def downgrade() -> None:
    op.drop_table("embeddings")
    with op.batch_alter_table("chunk_tags", schema=None) as batch_op:
        batch_op.drop_index("ix_chunk_tags_tag")

    op.drop_table("chunk_tags")
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chunks_source_date"))
        batch_op.drop_index(batch_op.f("ix_chunks_knowledge_type"))
        batch_op.drop_index(batch_op.f("ix_chunks_doc_id"))
        batch_op.drop_index(batch_op.f("ix_chunks_created_at"))
        batch_op.drop_index(batch_op.f("ix_chunks_content_sha"))

    op.drop_table("chunks")
    op.drop_table("index_versions")
    with op.batch_alter_table("index_changes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_index_changes_chunk_id"))

    op.drop_table("index_changes")
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_documents_source"))
        batch_op.drop_index(batch_op.f("ix_documents_normalized_hash"))

    op.drop_table("documents")

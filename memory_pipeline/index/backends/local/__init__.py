"""The local backend (the default): FAISS segments and tantivy files in versioned folders.

Everything lives under ``HYBRID_RAG_INDEX_PATH``, published as ``index/versions.py``
describes (a new version beside the published one, then one atomic rename of
``CURRENT``).

* ``dense.py``: immutable FAISS segments (flat, IVF or HNSW), searched by inner product.
* ``sparse.py``, ``sparse_files.py``, ``sparse_spaces.py``: the tantivy BM25 index over
  the project's tokens, its files, and its partitions, one per memory space (the Chroma
  backend keeps its BM25 side in these too).
* ``reader.py``: loads the published version, notices newer ones (``IndexSource``).
* ``manager.py``: the writer, updates and rebuilds from the store (``IndexUpdater``).
"""

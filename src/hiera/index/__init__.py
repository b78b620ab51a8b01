"""Indexes: BM25 (bm25s), dense vectors (FAISS + float16 matrix), manifests."""

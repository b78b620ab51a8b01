"""Benchmark scripts, run as modules from the repository root: ``python -m bench.wiki_qa`` (see README.md)."""

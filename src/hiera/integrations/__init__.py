"""hiera where applications already are: LangChain, LlamaIndex and MCP adapters over one :class:`Source`.

Each adapter is its own module and imports its framework when imported
(``pip install 'hiera[langchain]'``, ``'hiera[llamaindex]'``, ``'hiera[mcp]'``);
hiera itself never imports them. Every adapter searches a local collection or a
``hiera serve`` behind :class:`hiera.client.HieraClient` (:mod:`.source`).
docs/INTEGRATIONS.md has the details.
"""

from __future__ import annotations


def missing_extra(module: str, package: str, extra: str) -> ImportError:
    """The one-line error for an adapter whose framework is not installed."""
    return ImportError(f"hiera.integrations.{module} needs {package}: pip install 'hiera[{extra}]'")

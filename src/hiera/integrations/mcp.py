"""``hiera mcp COLL``: the collection as a Model Context Protocol server (the official ``mcp`` SDK).

An LLM agent (Claude Desktop, an IDE, any MCP client) gets these tools:

* ``search`` — any retrieval method; ranked passages (or documents) with their
  breadcrumbs, final and per-stage scores and a one-line reason each;
* ``set_query`` — set queries (``sets``): the members, each with the sentence of
  its document that supports each constraint, and the parsed expression;
* ``answer`` — retrieve, then read (only when a reader is given, or the server
  behind ``COLL`` has one): answers with their passage, offsets and evidence;
* ``get_document`` — one document's title tree with its passages (by id or title);
* ``list_methods`` — the methods with their parameters and defaults.

The tools' JSON-schema arguments are generated from the method registry
(:mod:`hiera.spec`): one property per parameter with its type, bounds, choices
and help, exactly what ``--set`` and ``/search`` take; model directories
(``path`` parameters) are not arguments, since a tool call must never make the
server load files. Arguments are checked against the schema, then by the
registry (a parameter the chosen method does not take is an error the agent
can read and correct); any failure is a tool error (``isError``), never a
crash. Every result is both readable text and ``structuredContent`` JSON.

``COLL`` is a collection directory or the URL of a ``hiera serve`` (searched
through :class:`hiera.client.HieraClient`). Transports: stdio (the default),
or streamable HTTP with ``--http HOST:PORT`` (path ``/mcp``).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from hiera.integrations import missing_extra

try:
    import anyio
    import jsonschema
    import mcp_types as types
    from mcp.server import Server
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("mcp", "the mcp SDK", "mcp") from None

from hiera.errors import BadInputError, HieraError, exceptions_only
from hiera.integrations.source import Source, hit_metadata
from hiera.results import Results
from hiera.spec import MAX_K, MAX_QUERY_CHARS, METHODS, READERS, Param, reader_spec
from hiera.version import __version__

__all__ = ["create_server", "run_http", "run_stdio", "tool_schemas"]

log = logging.getLogger("hiera.mcp")

MAX_READ_K = 100  # passages one answer reads (as /answer)
_JSON_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string"}
TEXT_CHARS = 600  # a hit's text in the readable rendering; structuredContent has it whole


def param_schema(p: Param, users: list[str]) -> dict[str, Any]:
    """One registry parameter as a JSON-schema property: type, bounds, choices, default and help."""
    s: dict[str, Any] = {"type": _JSON_TYPES[p.type], "description": f"{p.help} (methods: {', '.join(users)})"}
    if p.choices is not None:
        s["enum"] = list(p.choices)
    if p.min is not None:
        s["minimum"] = p.min
    if p.max is not None:
        s["maximum"] = p.max
    if p.default is not None:
        s["default"] = p.default
    return s


def _params(names: list[str]) -> dict[str, dict[str, Any]]:
    """Properties for every request-settable parameter of the methods ``names``, each saying who takes it.

    A method parameter's property has no ``default``: what a call without it uses depends on the method chosen
    (``lam`` is 1.75 for dhr and 1.0 for bm25-dhr) and on the collection (build-time ``--set`` and ``hiera tune``), and
    a client that filled one in would change the search or name a parameter the chosen method lacks. The
    description gives each method's registry default instead."""
    users: dict[str, list[tuple[str, Param]]] = {}
    for n in names:
        for p in METHODS[n].params:
            if p.http:
                users.setdefault(p.name, []).append((n, p))
    props: dict[str, dict[str, Any]] = {}
    for name, taken in users.items():
        s = param_schema(taken[0][1], [n for n, _ in taken])
        s.pop("default", None)
        s["description"] = f"{taken[0][1].help} ({_who_defaults(taken)})"
        props[name] = s
    return props


def _who_defaults(taken: list[tuple[str, Param]]) -> str:
    """``dhr: default 1.75; bm25-dhr, dhr-parallel: default 1.0; a collection may set its own``: methods grouped."""
    groups: dict[Any, list[str]] = {}
    for n, p in taken:
        groups.setdefault(p.default, []).append(n)
    if list(groups) == [None]:
        return "methods: " + ", ".join(taken_n for taken_n, _ in taken)
    parts = [f"{', '.join(ns)}" + ("" if d is None else f": default {d}") for d, ns in groups.items()]
    return "; ".join(parts) + "; a collection may set its own"


def _query(what: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "description": what}


def _k(limit: int, default: int, what: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": limit, "default": default, "description": what}


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


FILTER = {"type": "string", "description":
          "search only what this expression allows, e.g. \"source = wikipedia and year >= 2019\" "
          "or \"section prefix History\" (fields: id, title, source, categories, metadata keys, "
          "section; = != in contains prefix < <= > >=, and/or/not)"}


def tool_schemas(available: list[str], can_answer: bool,
                 reader_defaults: dict[str, Any] | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    """name → (description, input schema) for the tools this source can serve.

    ``reader_defaults``: the reader's decoding when a call sets nothing (a calibrated reader's own values), so
    that a client filling in the schema's defaults gets the answers a call without them gets."""
    methods = [n for n in METHODS if n in available and n != "sets"]
    default = "dhr" if "dhr" in methods else methods[0] if methods else None
    tools: dict[str, tuple[str, dict[str, Any]]] = {}
    if methods:
        tools["search"] = (
            "Search the collection. Returns ranked passages (or documents) with their breadcrumb "
            "(Title › Section › Subsection), the final score, each stage's score and rank, and why each ranks "
            "where it does. Methods: " + "; ".join(f"{n}: {METHODS[n].help}" for n in methods),
            _object({
                "query": _query("the question or keywords"),
                "k": _k(MAX_K, 10, "number of hits"),
                "method": {"type": "string", "enum": methods, "default": default, "description": "retrieval method"},
                "level": {"type": "string", "enum": ["passage", "doc"],
                          "description": "rank passages or documents (default: the method's first level)"},
                "filter": FILTER,
                **_params(methods),
            }, ["query"]),
        )
    if "sets" in available:
        tools["set_query"] = (
            "Answer a set query such as 'American physicists who were not chemists': parses it into constraints "
            "joined by and / or / not, classifies candidates per constraint and combines the sets. Returns the "
            "members, each with the sentence of its document that supports each constraint, the parsed "
            "expression, and the best non-members.",
            _object({"query": _query("the set query"), "k": _k(MAX_K, 20, "members and candidates returned"),
                     **_params(["sets"])}, ["query"]),
        )
    passage_methods = [n for n in methods if "passage" in METHODS[n].levels]
    if can_answer and passage_methods:
        reader = {p.name: param_schema(p, [reader_spec().name]) for p in reader_spec().params if p.http}
        for name, value in (reader_defaults or {}).items():
            if name in reader and value is not None:
                reader[name]["default"] = value
        # passages are read: a document-level parameter has nothing to do here
        search = {n: v for n, v in _params(passage_methods).items() if n != "doc_depth"}
        tools["answer"] = (
            "Answer a question: retrieve k passages and read answer spans from them. Returns ranked answers, "
            "each with its passage's breadcrumb, character offsets and every passage that gave the same answer.",
            _object({
                "query": _query("the question"),
                "k": _k(MAX_READ_K, 10, "passages retrieved and read"),
                "method": {"type": "string", "enum": passage_methods, "default": default,
                           "description": "retrieval method"},
                "filter": FILTER,
                **search,
                **reader,
            }, ["query"]),
        )
    tools["get_document"] = (
        "One document: its title, summary, table of contents and every section with its passages (the ids "
        "search returns), and for a document merged from several sources, their provenance.",
        _object({"id": {"type": "string", "minLength": 1, "maxLength": 1000,
                        "description": "a document id (doc_id of a hit) or a title"}}, ["id"]),
    )
    tools["list_methods"] = (
        "Every retrieval method (and reader) with its parameters: type, default, bounds, choices, and whether "
        "this collection can serve it.",
        _object({}, []),
    )
    return tools


# -- rendering ---------------------------------------------------------------------
def _hit_json(hit: Any, results: Results) -> dict[str, Any]:
    meta = hit_metadata(hit, results)
    return {**{k: meta[k] for k in ("rank", "score", "doc_id", "passage_id", "title", "breadcrumb", "stages", "reason")},
            "text": hit.text, **({"support": dict(hit.support)} if hit.support else {})}


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def search_payload(results: Results) -> tuple[dict[str, Any], str]:
    data = {"query": results.query, "method": results.retriever, "level": results.level,
            "params": {k: v for k, v in results.params.items() if isinstance(v, str | int | float | bool) or v is None},
            "hits": [_hit_json(h, results) for h in results.hits]}
    lines = [f"{len(results.hits)} {results.level}s from {results.retriever} for: {results.query}"]
    for h in results.hits:
        lines.append(f"\n{h.rank}. {h.breadcrumb()}  [score {h.score:.3f}; {h.reason()}]")
        lines.append(f"   id {h.passage_id or h.doc_id}")
        lines.append(f"   {_clip(h.text)}")
    return data, "\n".join(lines)


def sets_payload(results: Results) -> tuple[dict[str, Any], str]:
    members = set(results.answer_set or [])
    parse = next((s.detail for s in results.trace if s.name == "parse"), {})
    data = {
        "query": results.query,
        "expression": parse.get("expression"),
        "constraints": parse.get("constraints"),
        "members": [_hit_json(h, results) for h in results.hits if h.doc_id in members],
        "candidates": [_hit_json(h, results) for h in results.hits if h.doc_id not in members],
    }
    lines = [f"{results.query}\nparsed: {data['expression']}", f"{len(data['members'])} members:"]
    for h in data["members"]:
        lines.append(f"- {h['title']} (score {h['score']:.3f}, id {h['doc_id']})")
        for constraint, sentence in (h.get("support") or {}).items():
            lines.append(f"    {constraint}: {_clip(sentence)}")
    if data["candidates"]:
        lines.append("best non-members: " + ", ".join(h["title"] for h in data["candidates"][:10]))
    return data, "\n".join(lines)


def answer_payload(out: dict[str, Any]) -> tuple[dict[str, Any], str]:
    lines = [f"answers to: {out['question']}"]
    if not out["answers"]:
        lines.append("no answer: the passages hold no span the reader accepts")
    for i, a in enumerate(out["answers"], 1):
        lines.append(f"{i}. {a['text']}  [score {a['score']:.3f}] from {a['breadcrumb']} (passage {a['passage_id']})")
    return out, "\n".join(lines)


def document_payload(doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    lines = [f"{doc['title']} (id {doc['id']})"]
    for p in doc.get("lead_passages") or []:
        lines.append(f"[{p['id']}] {p['text']}")

    def walk(sections: list[dict[str, Any]]) -> None:
        for s in sections:
            lines.append("\n" + " › ".join([doc["title"], *s["path"]]))
            for p in s.get("passages") or []:
                lines.append(f"[{p['id']}] {p['text']}")
            walk(s.get("sections") or [])

    walk(doc.get("sections") or [])
    if doc.get("sources"):
        lines.append("\nsources: " + "; ".join(f"{s['source']} (id {s['id']})" for s in doc["sources"]))
    return doc, "\n".join(lines)


# -- the server -----------------------------------------------------------------------
class ToolError(HieraError):
    """A tool call the server answers with ``isError``: the message is for the agent to read and correct."""


def _split(args: dict[str, Any], skip: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k not in skip}


def call(source: Source, name: str, args: dict[str, Any], schemas: dict[str, tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], str]:
    """Run one tool call (blocking): checked arguments in, (structured, readable) out; bad input raises."""
    if name not in schemas:
        raise ToolError(f"unknown tool {name!r}; tools: {', '.join(schemas)}")
    schema = schemas[name][1]
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(args), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = ".".join(str(x) for x in e.path) or "arguments"
        raise ToolError(f"{name}: {where}: {e.message}")
    props = schema["properties"]
    k = int(args.get("k", props.get("k", {}).get("default", 10)))
    if name == "search":
        m = args.get("method", props["method"]["default"])
        res = source.search(args["query"], k, m, args.get("level"),
                            _split(args, ("query", "k", "method", "level", "filter")), args.get("filter"))
        return search_payload(res)
    if name == "set_query":
        res = source.search(args["query"], k, "sets", "doc", _split(args, ("query", "k")))
        return sets_payload(res)
    if name == "answer":
        m = args.get("method", props["method"]["default"])
        rnames = {p.name for p in READERS[reader_spec().name].params}
        params = {n: v for n, v in _split(args, ("query", "k", "method", "filter")).items() if n not in rnames}
        read = {n: v for n, v in args.items() if n in rnames}
        return answer_payload(source.answer(args["query"], k, m, params, read, args.get("filter")))
    if name == "get_document":
        return document_payload(source.document(args["id"]))
    methods = source.methods()
    return {"methods": methods}, json.dumps(methods, indent=1, ensure_ascii=False)


def create_server(source: Source) -> Server:
    """The MCP server over ``source``: its tools listed from the registry, each call run in a worker thread."""
    schemas = tool_schemas(source.available(), source.can_answer(), source.reader_defaults())
    limiter = anyio.CapacityLimiter(1)  # one search at a time: the collection's models are shared

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=n, description=d, input_schema=s,
                       annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True,
                                                         open_world_hint=False))
            for n, (d, s) in schemas.items()
        ])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        try:
            data, text = await anyio.to_thread.run_sync(
                lambda: exceptions_only(lambda: call(source, params.name, args, schemas)), limiter=limiter)
        except HieraError as e:
            return types.CallToolResult(content=[types.TextContent(text=str(e))], is_error=True)
        except Exception as e:  # a bug in hiera, reported to the agent; the server goes on
            log.exception("tool %s failed", params.name)
            return types.CallToolResult(content=[types.TextContent(text=f"internal error: {type(e).__name__}: {e}")],
                                        is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)

    return Server(
        "hiera", version=__version__,
        instructions=f"Search the hiera collection {source.name}: hierarchical retrieval over documents with "
        "titles and nested sections. Use search for passages with breadcrumbs, set_query for lists of entities "
        "defined by constraints, get_document to read a whole document, list_methods for every parameter.",
        on_list_tools=list_tools, on_call_tool=call_tool,
    )


async def _stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run_stdio(source: Source) -> None:
    """Serve over stdin/stdout until the client closes them (what an MCP client starts as a subprocess)."""
    anyio.run(_stdio, create_server(source))


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInputError(f"--http takes HOST:PORT, like 127.0.0.1:8765; got {text!r}")
    return host.strip("[]"), int(port)


def run_http(source: Source, address: str) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` (DNS-rebinding protection on for loopback hosts)."""
    import uvicorn

    host, port = parse_address(address)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"hiera mcp: warning: listening on {host}, reachable from other machines, without authentication",
              file=sys.stderr)
    app = create_server(source).streamable_http_app(host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")

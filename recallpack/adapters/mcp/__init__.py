"""``recallpack serve``: the recall tool over MCP, so that any agent host can call it.

A thin translator, like the other adapters: an MCP ``tools/call`` of ``recall`` becomes one
recall of a :class:`RecallSource` (the embedded docs index, or a user's LangChain or LlamaIndex
retriever wrapped in its ``BudgetedRetriever``), and the :class:`~recallpack.RecallResult`
becomes the tool's result:

- its text content is ``to_markdown()``, exactly the bytes the packer counted (``""`` when
  nothing was kept);
- its structured content is the diagnostics: seed 003's ``context_tokens_used``,
  ``chunks_selected``, ``chunks_dropped`` and ``tokenizer_used``, the whole report, each kept
  item's citation, and the block's receipt when a receipt key is configured
  (``$RECALLPACK_RECEIPT_KEY``);
- invalid input is a tool error (``isError``) whose structured content is the envelope
  ``{"status": "error", "error_code": "invalid_input", "error_message": ...}``, the message
  saying what to fix. The server goes on serving.

A kept item with a resource URI can be read back as an MCP resource, for the same reader only:
an item the reader may not see reads exactly like one that does not exist. On stdio the reader
is the source's configured one; over HTTP with a token verifier (:mod:`.auth`) it is each
call's caller, so one server serves a team. Needs the ``mcp`` extra; ``import recallpack``
never imports this module.
"""

from recallpack.adapters.mcp.server import (
    DEFAULT_OVERLAP_TOKENS,
    DEFAULT_WINDOW_TOKENS,
    MAX_QUERY_CHARS,
    TOOL_NAME,
    ReaderVerifier,
    RecallSource,
    build_server,
    check_arguments,
    docs_source,
    http_app,
    load_factory,
    retriever_source,
    serve,
)

__all__ = [
    "TOOL_NAME",
    "MAX_QUERY_CHARS",
    "DEFAULT_WINDOW_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "RecallSource",
    "docs_source",
    "retriever_source",
    "load_factory",
    "check_arguments",
    "build_server",
    "http_app",
    "serve",
    "ReaderVerifier",
]

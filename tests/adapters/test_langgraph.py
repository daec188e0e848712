"""StoreRetriever: a LangGraph store's items as Documents (text, metadata, citation, scopes), its
settings checked where they are given, and its namespace filled from the running graph."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph.store.base")

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore

from recallpack import ConfigError, Reader, UpstreamError, count_tokens
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.adapters.langgraph import StoreRetriever
from recallpack.testing import HashingEmbeddings


def memory() -> InMemoryStore:
    """Two users' facts and one session episode, as an agent would have written them."""
    store = InMemoryStore()
    store.put(("users", "alice", "facts"), "tea", {"text": "Alice drinks green tea.", "kind": "drink"})
    store.put(("users", "alice", "facts"), "city", {"text": "Alice lives in Lyon.", "kind": "place"})
    store.put(("users", "alice", "episodes"), "s1", {"text": "Session 1: Alice planned a trip to Kyoto."})
    store.put(("users", "bob", "facts"), "tea", {"text": "Bob drinks black coffee, never tea."})
    return store


def test_documents_carry_the_item_and_cite_it() -> None:
    """Each Document is its item's text, with namespace, key, times, score and a store:// source."""
    store = memory()
    (doc,) = StoreRetriever(store=store, namespace=("users", "alice", "facts"), filter={"kind": "drink"}).invoke("tea")
    item = store.get(("users", "alice", "facts"), "tea")
    assert item is not None and doc.page_content == "Alice drinks green tea."
    assert doc.metadata == {
        "namespace": ["users", "alice", "facts"], "key": "tea", "score": None,
        "created_at": item.created_at.isoformat(), "updated_at": item.updated_at.isoformat(),
        "source": "store://users/alice/facts#tea",
    }  # fmt: skip
    assert doc.id == "store://users/alice/facts#tea"


def test_a_vector_index_score_reaches_the_metadata_and_ranks() -> None:
    """With an index, the store's similarity is each Document's score, best first."""
    store = InMemoryStore(index={"dims": 256, "embed": HashingEmbeddings(), "fields": ["text"]})
    for key, text in [("a", "Alice lives in Lyon."), ("b", "Alice drinks green tea every morning.")]:
        store.put(("users", "alice"), key, {"text": text})
    docs = StoreRetriever(store=store, namespace=("users",)).invoke("green tea in the morning")
    assert [d.metadata["key"] for d in docs] == ["b", "a"]
    assert docs[0].metadata["score"] > docs[1].metadata["score"] > 0


def test_labels_and_keys_are_quoted_in_the_citation() -> None:
    """A label or key with spaces or '#' still gives a resource line that names one item."""
    store = InMemoryStore()
    store.put(("team notes", "q#3"), "a/b c", {"text": "Quarterly goals."})
    (doc,) = StoreRetriever(store=store, namespace=("team notes",)).invoke("")
    assert doc.metadata["source"] == "store://team%20notes/q%233#a%2Fb%20c"


def test_text_field_takes_a_key_or_a_function() -> None:
    """text_field names the value's key, or is a function of the value."""
    store = InMemoryStore()
    store.put(("m",), "1", {"content": {"body": "nested text"}, "memo": "flat text"})
    assert StoreRetriever(store=store, namespace=("m",), text_field="memo").invoke("")[0].page_content == "flat text"
    nested = StoreRetriever(store=store, namespace=("m",), text_field=lambda value: value["content"]["body"])
    assert nested.invoke("")[0].page_content == "nested text"


def test_an_unscoped_item_without_text_is_an_error_naming_it() -> None:
    """An everyone's item whose value has no text under text_field: an UpstreamError naming the fix."""
    store = InMemoryStore()
    store.put(("m",), "1", {"body": "text under another key"})
    with pytest.raises(UpstreamError, match=r"store://m#1 has no str text under 'text'; set text_field=") as caught:
        StoreRetriever(store=store, namespace=("m",)).invoke("")
    assert caught.value.field == "text_field"


def test_a_scoped_item_without_text_is_never_named_to_another_reader() -> None:
    """Another user's malformed item is withheld, unnamed; its owner's recall drops it as empty."""
    store = memory()
    store.put(("users", "bob", "facts"), "broken", {"body": "no text key"})
    retriever = StoreRetriever(store=store, namespace=("users",), scope_from=1)
    for reader in ("alice", "bob"):
        result = BudgetedRetriever(retriever, max_tokens=200, reader=Reader(id=reader)).recall("tea")
        assert "broken" not in result.to_markdown() and "broken" not in str(result.to_event())
        assert all(f"/users/{reader}/" in str(e.resource_uri) for e in result.evidence)


@pytest.mark.parametrize(("scope_from", "scopes"), [(1, ["alice"]), (-2, ["alice"]), (5, []),
                                                     (lambda ns: [ns[0], ns[1]], ["users", "alice"]),
                                                     (lambda ns: ns[1], ["alice"]), (lambda ns: None, None)])  # fmt: skip
def test_scope_from_reads_scope_ids_from_the_namespace(scope_from: Any, scopes: list[str] | None) -> None:
    """An index into the namespace, or a function of it, gives the scope ids (past its end: none readable)."""
    (doc,) = StoreRetriever(store=memory(), namespace=("users", "alice", "facts"), scope_from=scope_from,
                            filter={"kind": "place"}).invoke("")  # fmt: skip
    assert doc.metadata.get("scope_ids") == scopes


def test_an_index_past_the_namespace_withholds_the_item_from_every_reader() -> None:
    """scope_from past an item's namespace fails closed: the item is shown to no reader."""
    retriever = StoreRetriever(store=memory(), namespace=("users",), scope_from=7)
    result = BudgetedRetriever(retriever, max_tokens=300, reader=Reader(id="alice")).recall("tea")
    assert result.evidence == () and result.report.items_withheld == 4


def test_lanes_label_derived_and_session_memory_within_one_budget() -> None:
    """from_lanes over a facts and an episodes namespace: one exact block, both provenance labels."""
    store = memory()
    lanes = BudgetedRetriever.from_lanes(
        {"facts": StoreRetriever(store=store, namespace=("users", "alice", "facts")),
         "working_memory": StoreRetriever(store=store, namespace=("users", "alice", "episodes"))},
        max_tokens=160, tokenizer="cl100k_base",
    )  # fmt: skip
    result = lanes.recall("Alice tea trip Kyoto Lyon")
    block = result.to_markdown()
    assert result.report.tokens_used == count_tokens(block, "cl100k_base") <= 160
    assert {e.label for e in result.evidence} == {"Derived memory", "Recent session memory"}
    assert "Resource `store://users/alice/episodes#s1`" in block


def test_a_lane_set_on_the_retriever_labels_its_documents() -> None:
    """StoreRetriever(lane=...) tags each Document, so one BudgetedRetriever labels it."""
    retriever = StoreRetriever(store=memory(), namespace=("users", "alice", "episodes"), lane="working_memory")
    assert retriever.invoke("")[0].metadata["lane"] == "working_memory"
    result = BudgetedRetriever(retriever, max_tokens=100).recall("trip")
    assert [e.label for e in result.evidence] == ["Recent session memory"]


class State(TypedDict):
    query: str
    found: list[str]


def graph_searching(retriever: StoreRetriever, store: InMemoryStore | None, **compile: Any) -> Any:
    """A one-node graph whose node searches with ``retriever`` (sync and async)."""

    def search(state: State) -> dict[str, list[str]]:
        return {"found": [d.metadata["source"] for d in retriever.invoke(state["query"])]}

    async def asearch(state: State) -> dict[str, list[str]]:
        return {"found": [d.metadata["source"] for d in await retriever.ainvoke(state["query"])]}

    builder = StateGraph(State)
    builder.add_node("search", search if not compile.pop("asynchronous", False) else asearch)
    builder.add_edge(START, "search")
    return builder.compile(store=store, **compile)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_namespace_is_filled_from_the_running_graph(mode: str) -> None:
    """{user_id} comes from the run's configurable, and store=None is the graph's own store."""
    retriever = StoreRetriever(namespace=("users", "{user_id}", "facts"))
    graph = graph_searching(retriever, memory(), asynchronous=mode == "async")
    for user, expected in [("alice", {"tea", "city"}), ("bob", {"tea"})]:
        config: RunnableConfig = {"configurable": {"user_id": user}}
        state = {"query": "tea", "found": []}
        out = graph.invoke(state, config) if mode == "sync" else await graph.ainvoke(state, config)
        assert {s.rsplit("#", 1)[1] for s in out["found"]} == expected
        assert all(s.startswith(f"store://users/{user}/facts#") for s in out["found"])


def test_a_namespace_field_missing_from_the_run_is_refused() -> None:
    """No value for {user_id}: a ConfigError naming the field, and no search under a partial namespace."""
    graph = graph_searching(StoreRetriever(namespace=("users", "{user_id}")), memory())
    with pytest.raises(ConfigError, match=r"namespace field \{user_id\} is None in this call") as caught:
        graph.invoke({"query": "tea", "found": []})
    assert caught.value.field == "namespace"
    with pytest.raises(ConfigError, match=r"\{user_id\} is 'a.b'"):
        graph.invoke({"query": "tea", "found": []}, {"configurable": {"user_id": "a.b"}})


def test_no_store_outside_a_graph_is_refused() -> None:
    """store=None outside a graph with a store: a ConfigError saying to pass one."""
    with pytest.raises(ConfigError, match="pass store=") as caught:
        StoreRetriever(namespace=("users",)).invoke("tea")
    assert caught.value.field == "store"


@pytest.mark.parametrize(("settings", "field", "message"), [
    ({"store": "not a store"}, "store", "must be a LangGraph BaseStore"),
    ({"namespace": "users"}, "namespace", "must be a tuple of labels"),
    ({"namespace": ("users", "")}, "namespace", "non-empty str without '.'"),
    ({"namespace": ("a.b",)}, "namespace", "non-empty str without '.'"),
    ({"namespace": ("{user_id!r}",)}, "namespace", "a placeholder is a plain name"),
    ({"namespace": ("{user_id",)}, "namespace", "cannot be filled"),
    ({"text_field": ""}, "text_field", "must be the key of the value"),
    ({"scope_from": "1"}, "scope_from", "must be an index into an item's namespace"),
    ({"scope_from": True}, "scope_from", "must be an index"),
    ({"k": 0}, "k", "must be at least 1"),
    ({"lane": "derived"}, "lane", "is not a lane kind"),
    ({"txt_field": "x"}, "txt_field", "did you mean 'text_field'"),
    ({"limit": 5}, "limit", "unknown setting 'limit'"),
])  # fmt: skip
def test_bad_settings_are_refused_naming_the_field(settings: dict[str, Any], field: str, message: str) -> None:
    """Each bad setting is a ConfigError with its field and the fix, at construction."""
    given = {"store": InMemoryStore(), "namespace": ("users",), **settings}
    with pytest.raises(ConfigError, match=message) as caught:
        StoreRetriever(**given)
    assert caught.value.field == field


@pytest.mark.parametrize(("kwargs", "message"), [({"kk": 3}, "did you mean 'k'"), ({"k": 0}, "k=0 must be an int"),
                                                 ({"filter": "kind"}, "filter='kind' must be a dict")])  # fmt: skip
def test_bad_per_call_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    """invoke's own keywords are checked before the store is searched."""
    with pytest.raises(ConfigError, match=message):
        StoreRetriever(store=memory(), namespace=("users",)).invoke("tea", **kwargs)


def test_a_per_call_filter_and_k_apply_to_that_call_only() -> None:
    """invoke(..., filter=..., k=...) narrows one search; the retriever keeps its own."""
    retriever = StoreRetriever(store=memory(), namespace=("users",), k=10)
    assert [d.metadata["key"] for d in retriever.invoke("", filter={"kind": "place"})] == ["city"]
    assert len(retriever.invoke("", k=2)) == 2 and len(retriever.invoke("")) == 4


def test_without_the_extra_the_import_names_it() -> None:
    """Importing the adapter without langgraph says to install recallpack[langgraph]."""
    code = ("import sys; sys.modules['langgraph'] = None\n"
            "try:\n    import recallpack.adapters.langgraph\nexcept ImportError as e:\n    print(e)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "recallpack[langgraph] (the 'langgraph' extra)" in out


def test_the_module_docstring_example_runs() -> None:
    """The >>> example of recallpack.adapters.langgraph passes."""
    import doctest

    import recallpack.adapters.langgraph as module

    assert doctest.testmod(module, raise_on_error=False).failed == 0
    assert doctest.testmod(module).attempted >= 4


def test_the_bench_section_measures_each_store() -> None:
    """python -m recallpack.bench's langgraph section times each store's search against the adapter's."""
    from recallpack import bench
    from recallpack._bench import langgraph as section

    assert "langgraph" in bench.SECTIONS
    lines = section.run(items=60, queries=4, k=5)
    assert lines[0].startswith("langgraph: 60 memory items") and len(lines) == 4
    for line, store in zip(lines[1:], ("InMemoryStore + index", "SqliteStore (file)", "InMemoryStore")):
        assert line.strip().startswith(store) and "StoreRetriever.invoke" in line
    assert " info " in lines[3] and not any(" info " in line for line in lines[1:3])

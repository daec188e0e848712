"""The host table: no adapter on import, each host's reader imported when its object first comes,
and a new host registered from outside (this module is the toy host's reader) and undone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallpack import (
    Candidate,
    ConfigError,
    Packer,
    RecallResult,
    TokenizerError,
    budget_for,
    get_tokenizer,
    recall,
)
from recallpack.adapters.shared.depth import own_depth
from recallpack.adapters.shared.served import Served
from recallpack.packing.choosing.embedding import Similarity
from recallpack.packing.counting.model_budget import ModelWindow
from recallpack.packing.hosts import HOSTS, Host, hosts, register_host, unregister_host
from recallpack.packing.tokenizers import CallableTokenizer, Tokenizer

READERS = "[m for m in sys.modules if m.startswith('recallpack.adapters')]"


def _imported_after(code: str) -> list[str]:
    """The recallpack.adapters modules a fresh interpreter has imported after running ``code``."""
    run = subprocess.run([sys.executable, "-c", f"import sys\n{code}\nprint(sorted({READERS}))"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return eval(run.stdout.strip().splitlines()[-1])  # a list of str, printed by us


def test_import_recallpack_imports_no_adapter() -> None:
    """``import recallpack`` imports no module of recallpack.adapters."""
    assert _imported_after("import recallpack") == []


def test_what_the_core_knows_itself_imports_no_reader() -> None:
    """Names, functions, a lambda embed= and an int window are the core's own: no reader is imported."""
    code = (
        "import recallpack\n"
        "words = [recallpack.Candidate(text='Paris is in France. Lyon is too. Rome is not.')]\n"
        "recallpack.recall(words, max_tokens=200, tokenizer=str.split, query='Paris')\n"
        "recallpack.recall(words, max_tokens=200, query='Paris', embed=lambda ts: [[len(t), 1.0] for t in ts])\n"
        "recallpack.get_tokenizer('chars'); recallpack.budget_for(8192)"
    )
    assert _imported_after(code) == []


def test_a_hosts_object_imports_that_hosts_reader_alone() -> None:
    """A LangChain model as tokenizer= imports the langchain reader, and no other host's."""
    code = (
        "import recallpack\n"
        "from langchain_core.language_models import FakeListChatModel\n"
        "model = FakeListChatModel(responses=['ok'], custom_get_token_ids=lambda t: t.split())\n"
        "assert recallpack.count_tokens('one two three', model) == 3"
    )
    from recallpack.packing.hosts import HOSTS

    readers = [m for m in _imported_after(code) if m in {host.reader for host in HOSTS}]
    assert readers == ["recallpack.adapters.langchain.reader"]


# -- a toy host, whose reader is this module ---------------------------------------------------

#: What read_embedding takes, in an error's words (a reader's EMBEDDINGS).
EMBEDDINGS = "an Abacus (query_beads and text_beads)"


class Abacus:
    """A toy host's object: it counts (one bead a word), embeds (word lengths) and has a window."""

    window = 1000

    def beads(self, text: str) -> int:
        return len(text.split())

    def query_beads(self, text: str) -> list[float]:
        return [float(len(text.split())), 1.0]

    def text_beads(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float("Paris" in text), 1.0] for text in texts]


def read_tokenizer(obj: object) -> Tokenizer | None:
    """The toy host's tokenizer reader."""
    return CallableTokenizer(obj.beads, name="abacus") if isinstance(obj, Abacus) else None


def read_embedding(obj: object) -> Similarity | None:
    """The toy host's embedding reader."""
    return Similarity(obj, ("query_beads", "text_beads")) if isinstance(obj, Abacus) else None


def read_model(obj: object) -> ModelWindow | None:
    """The toy host's window reader: it reserves 100 tokens for its answer and counts its own prompt."""
    if not isinstance(obj, Abacus):
        return None
    return ModelWindow(obj.window, 100, "Abacus.window", "give the Abacus a window", counter=obj)


class AbacusRetriever:
    """A toy host's retriever: it returns its ``rods`` (its own depth) of beads, in order."""

    rods = 7

    def beads(self) -> list[Candidate]:
        return [Candidate(text=f"bead {n} " * 20, metadata={"source": f"rod-{n}"}) for n in range(self.rods)]


class BudgetedAbacus:
    """What the toy host's reader wraps an AbacusRetriever in for ``recallpack serve``."""

    def __init__(self, upstream: AbacusRetriever, **settings: object) -> None:
        self.upstream, self.packer = upstream, Packer(**settings)  # type: ignore[arg-type]

    async def arecall(self, query: str, *, max_tokens: int, reader: object = None) -> RecallResult:
        return self.packer.recall(self.upstream.beads(), query=query, max_tokens=max_tokens)


def read_depth(obj: object) -> int | None:
    """The toy host's depth reader: an AbacusRetriever returns its rods."""
    return obj.rods if isinstance(obj, AbacusRetriever) else None


def read_retriever(obj: object) -> Served | None:
    """The toy host's retriever, as ``recallpack serve --retriever`` wraps it."""
    if not isinstance(obj, AbacusRetriever):
        return None
    return Served("Abacus", lambda **settings: BudgetedAbacus(obj, **settings))


@pytest.fixture
def abacus() -> Iterator[Host]:
    """The toy host, registered for one test; the table is as it was afterwards."""
    before = hosts()
    yield register_host(Host("abacus", ("tests",), __name__))
    unregister_host("abacus")
    assert hosts() == before


def test_an_unregistered_hosts_object_is_refused() -> None:
    """Before its host is registered, an Abacus is no tokenizer, embedding or model."""
    with pytest.raises(TokenizerError, match="tokenizer="):
        get_tokenizer(Abacus())
    with pytest.raises(ConfigError, match="embed="):
        Packer(embed=Abacus())
    with pytest.raises(ConfigError, match="budget_for"):
        budget_for(Abacus())


def test_a_registered_host_reads_its_objects_everywhere(abacus: Host) -> None:
    """A host registered from a test module: its tokenizer, embedding and window work as the built-ins' do."""
    assert abacus in hosts() and hosts()[: len(HOSTS)] == HOSTS
    assert get_tokenizer(Abacus()).count("one two three") == 3
    assert budget_for(Abacus()) == 900
    assert budget_for(Abacus(), prompt="four words of prompt") == 896  # its own counter counts the prompt
    texts = ["Rome is old. " * 6, "Paris is the capital. " * 6]
    # Its embedding likes Paris whatever the query: BM25 alone would keep Rome.
    result = recall([Candidate(text=t) for t in texts], max_tokens=20, tokenizer=Abacus(),
                    query="Rome", embed=Abacus(), policy="passages")  # fmt: skip
    assert result.report.tokenizer_used == "abacus"
    assert [e.text.strip("… ") for e in result.evidence] == ["Paris is the capital."]


def test_an_embed_error_names_every_hosts_embeddings(abacus: Host) -> None:
    """embed= that no host reads is refused with what each host takes, the registered one too."""
    with pytest.raises(ConfigError, match="LangChain Embeddings.*LlamaIndex BaseEmbedding.*an Abacus"):
        Packer(embed=42)


class CountingAbacus(Abacus):
    """An Abacus shaped like a LangChain model too (get_num_tokens): its own host reads it first."""

    def get_num_tokens(self, text: str) -> int:
        return 100


def test_an_object_goes_first_to_the_host_its_class_comes_from(abacus: Host) -> None:
    """The host whose package the class comes from reads it, though registered after LangChain's duck-typing."""
    assert get_tokenizer(CountingAbacus()).name == "abacus"


def test_unregistered_the_duck_typing_of_the_built_in_hosts_reads_it() -> None:
    """With no toy host, a class of the caller's own with a LangChain model's shape is read as one."""
    assert get_tokenizer(CountingAbacus()).count("one two") == 100


def test_registering_is_checked_and_undone_explicitly(abacus: Host) -> None:
    """A taken name, a reader that is no module, an unknown name to undo: each a ConfigError saying the fix."""
    with pytest.raises(ConfigError, match=r"unregister_host\('abacus'\) first") as taken:
        register_host(Host("abacus", ("tests",), __name__))
    assert taken.value.field == "host"
    with pytest.raises(ConfigError, match="tests.no_such_reader"):
        register_host(Host("ghost", ("ghost",), "tests.no_such_reader"))
    with pytest.raises(ConfigError, match="no host named 'ghost'"):
        unregister_host("ghost")
    with pytest.raises(ConfigError, match="takes a Host"):
        register_host("abacus")  # type: ignore[arg-type]
    for packages in ("tests", (), ("tests.abacus",), ("",)):
        with pytest.raises(ConfigError, match=r"Host\(packages=.*\('haystack',\)") as raised:
            Host("abacus", packages, __name__)  # type: ignore[arg-type]
        assert raised.value.field == "packages"
    with pytest.raises(ConfigError, match="non-empty str"):
        Host("", ("tests",), __name__)


def test_a_reader_whose_framework_is_missing_is_passed_over_unless_its_object_comes() -> None:
    """A reader that cannot be imported (its framework is not installed) is skipped for other
    objects, and its import error is raised for an object of its own package."""
    ghost = register_host(Host("ghost", ("ghost_framework",), "tests.hosts_reader_without_its_framework"))
    try:
        assert get_tokenizer(CountingAbacus()).count("x") == 100  # passed over: not its object
        own = type("Model", (), {"__module__": "ghost_framework.models"})()
        with pytest.raises(ModuleNotFoundError, match="ghost_framework"):
            get_tokenizer(own)
    finally:
        unregister_host(ghost.name)
    assert hosts() == HOSTS


#: Host names, and the order they are undone in (drawn up front: a draw while undoing could stop midway).
REGISTRATIONS = st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True).flatmap(
    lambda names: st.tuples(st.just(names), st.permutations(names))
)


@given(REGISTRATIONS)
def test_any_registrations_undone_in_any_order_leave_the_table_as_it_was(
    registrations: tuple[list[str], list[str]],
) -> None:
    """Registering hosts and unregistering them, in any order, leaves the built-in table, in its order."""
    names, undone = registrations
    try:
        for name in names:
            register_host(Host(name, (name,), __name__))
        assert [host.name for host in hosts()] == [host.name for host in HOSTS] + names
    finally:
        for name in undone:
            unregister_host(name)
    assert hosts() == HOSTS


def test_a_retrievers_own_depth_is_what_its_hosts_reader_says(abacus: Host) -> None:
    """own_depth switches on no host: a registered host's read_depth says its retriever's depth,
    and the built-in hosts' readers still say LangChain's k and LlamaIndex's similarity_top_k."""
    assert own_depth(AbacusRetriever()) == 7
    assert own_depth(type("Bm25", (), {"k": 3})()) == 3
    assert own_depth(type("Top", (), {"similarity_top_k": 5})()) == 5
    assert own_depth(lambda query: []) is None


def test_unregistered_a_hosts_retriever_has_no_depth() -> None:
    """Before its host is registered, an AbacusRetriever says no depth: no switch knows it."""
    assert own_depth(AbacusRetriever()) is None


def test_recallpack_serve_wraps_a_registered_hosts_retriever() -> None:
    """The server's retriever source reads the host table: a registered host's retriever is
    served (with its label), and refused again once the host is unregistered."""
    pytest.importorskip("anyio")
    import anyio

    from recallpack.adapters.mcp.sources import retriever_source

    with pytest.raises(ConfigError, match="must return a LangChain retriever"):
        retriever_source(AbacusRetriever(), max_tokens=400)
    register_host(Host("abacus", ("tests",), __name__))
    try:
        source = retriever_source(AbacusRetriever(), max_tokens=400)
        result = anyio.run(source.recall, "bead 3", 200, None)
    finally:
        unregister_host("abacus")
    assert source.what == "the Abacus AbacusRetriever" and source.packer.max_tokens == 400
    assert 0 < result.report.tokens_used <= 200 and "bead" in result.evidence[0].text
    with pytest.raises(ConfigError, match="must return a LangChain retriever"):
        retriever_source(AbacusRetriever(), max_tokens=400)

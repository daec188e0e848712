"""Workers: everything a worker needs pickles and deep-copies, and a batch equals a loop."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from recallpack import Candidate, Packer, Reader, Scope, recall, recall_many
from recallpack.testing import paragraphs

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from llama_index.core.retrievers import BaseRetriever as LlamaRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from recallpack.adapters import langchain as lc  # noqa: E402
from recallpack.adapters import llamaindex as li  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.retrievers import BM25Retriever

TEXTS = [text for _, text in paragraphs()][:300]
QUERY = "parse the command line arguments"


def lists(n: int, size: int = 40) -> list[list[Candidate]]:
    """``n`` candidate lists of real paragraphs, each in another order, some scoped."""
    out = []
    for i in range(n):
        picked = [TEXTS[(i * 7 + j * 13) % len(TEXTS)] for j in range(size)]
        out.append([Candidate(text=t, **({"scope_ids": ("org",)} if j % 9 == 4 else {})) for j, t in enumerate(picked)])
    return out


READER = Reader(id="me", scopes={"org": Scope(name="team")})


def test_recall_many_equals_a_loop_of_recall() -> None:
    """recall_many gives, list by list, the same bytes and report as recall in a loop."""
    batch = lists(300)
    packer = Packer(max_tokens=600, reader=READER)
    many = packer.recall_many(batch)
    loop = [packer.recall(c) for c in batch]
    assert [r.to_markdown() for r in many] == [r.to_markdown() for r in loop]
    assert [r.report for r in many] == [r.report for r in loop]
    module = recall_many(batch, max_tokens=600, reader=READER, queries=[QUERY] * len(batch))
    assert [r.to_markdown() for r in module] == [recall(c, max_tokens=600, reader=READER, query=QUERY).to_markdown() for c in batch]


def test_recall_many_checks_its_queries() -> None:
    """A queries list of another length is refused before any work."""
    from recallpack import ConfigError

    with pytest.raises(ConfigError, match="queries has 1 entries for 2"):
        Packer().recall_many(lists(2), queries=["q"])


class FixedNodes(LlamaRetriever):
    """A picklable LlamaIndex retriever over fixed texts."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        super().__init__()

    def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 / (i + 1)) for i, t in enumerate(self.texts)]


#: A template as source and as a file, as docs/scaling.md promises workers can take either: a
#: copy carries the template's source, so a worker needs neither the file nor a compiled one.
TEMPLATE = "{% for e in evidence %}* [{{ e.label }}] {{ e.text|oneline }}\n{% endfor %}"
TEMPLATE_FILE = Path(tempfile.mkdtemp(prefix="recallpack-template-")) / "evidence.j2"
TEMPLATE_FILE.write_text(TEMPLATE.replace("* [", "- ["), encoding="utf-8")


def _objects() -> dict[str, Any]:
    bm25 = BM25Retriever.from_texts(TEXTS[:120], k=8)
    result = recall(lists(1)[0], max_tokens=500, reader=READER)
    templated = {
        f"{name} with a {kind} template": build(template)
        for kind, template in (("str", TEMPLATE), ("Path", TEMPLATE_FILE))
        for name, build in (
            ("packer", lambda t: Packer(max_tokens=500, reader=READER, template=t)),
            ("langchain retriever", lambda t: lc.BudgetedRetriever(retriever=bm25, max_tokens=400, template=t)),
            ("langchain compressor", lambda t: lc.BudgetCompressor(max_tokens=300, template=t)),
            ("llamaindex postprocessor", lambda t: li.BudgetPostprocessor(max_tokens=300, template=t)),
            ("llamaindex retriever", lambda t: li.BudgetedRetriever(FixedNodes(TEXTS[:20]), max_tokens=300, template=t)),
        )
    }
    return {
        "candidate": Candidate(text="Alice works at Initech.", scope_ids=("org",), score=0.5),
        "packer": Packer(max_tokens=500, reader=READER, lane_budgets={"facts": 50}),
        "result": result,
        "report": result.report,
        "langchain retriever": lc.BudgetedRetriever(retriever=bm25, max_tokens=400, reader=READER),
        "langchain compressor": lc.BudgetCompressor(max_tokens=300),
        "llamaindex postprocessor": li.BudgetPostprocessor(max_tokens=300),
        "llamaindex retriever": li.BudgetedRetriever(FixedNodes(TEXTS[:20]), max_tokens=300),
        **templated,
    }


def output_of(obj: Any) -> Any:
    """What an object produces: the bytes a worker would write."""
    if isinstance(obj, Packer):
        return obj.recall(lists(1)[0]).to_markdown()
    if isinstance(obj, lc.BudgetedRetriever):
        return obj.recall(QUERY).to_markdown()
    if isinstance(obj, lc.BudgetCompressor):
        from langchain_core.documents import Document

        return obj.compress([Document(page_content=t) for t in TEXTS[:30]], QUERY).to_markdown()
    if isinstance(obj, li.BudgetPostprocessor):
        nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}")) for i, t in enumerate(TEXTS[:30])]
        kept, result = obj.pack_nodes(nodes)
        return [n.node.get_content() for n in kept], result.to_markdown()
    if isinstance(obj, li.BudgetedRetriever):
        return obj.recall(QUERY).to_markdown()
    if hasattr(obj, "to_markdown"):
        return obj.to_markdown()
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    raise AssertionError(type(obj))


@pytest.mark.parametrize("name", list(_objects()))
@pytest.mark.parametrize("how", ["pickle", "cloudpickle", "deepcopy"])
def test_worker_objects_round_trip_with_identical_output(name: str, how: str) -> None:
    """Each object a worker needs survives pickle, cloudpickle and deepcopy and gives the same bytes."""
    obj = _objects()[name]
    if how == "pickle":
        copied = pickle.loads(pickle.dumps(obj))
    elif how == "cloudpickle":
        copied = cloudpickle.loads(cloudpickle.dumps(obj))
    else:
        copied = copy.deepcopy(obj)
    assert output_of(copied) == output_of(obj)


def _in_worker(payload: bytes) -> Any:
    return output_of(pickle.loads(payload))


def test_worker_objects_work_in_another_process() -> None:
    """Shipped to a spawned worker process, each object produces the same bytes there."""
    objects = _objects()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        remote = dict(zip(objects, pool.map(_in_worker, [pickle.dumps(o) for o in objects.values()])))
    assert remote == {name: output_of(obj) for name, obj in objects.items()}


def test_a_pickled_result_is_proportional_to_what_was_kept() -> None:
    """A result of a few kept items pickles small however many candidates it was handed."""
    big = [Candidate(text=TEXTS[i % len(TEXTS)] + f" #{i}") for i in range(20_000)]
    small = recall(big[:50], max_tokens=300)
    large = recall(big, max_tokens=300)
    assert len(large.evidence) == len(small.evidence)
    assert len(pickle.dumps(large)) < 2 * len(pickle.dumps(small))


def test_a_template_file_is_not_needed_where_a_copy_arrives(tmp_path: Path) -> None:
    """A Packer built from a template file carries its source: the file may be gone in the worker."""
    path = tmp_path / "block.j2"
    path.write_text(TEMPLATE, encoding="utf-8")
    packer = Packer(max_tokens=500, template=path)
    payloads = [pickle.dumps(packer), cloudpickle.dumps(packer)]
    path.unlink()
    for copied in [pickle.loads(payloads[0]), cloudpickle.loads(payloads[1]), copy.deepcopy(packer)]:
        assert output_of(copied) == output_of(packer) and output_of(packer).startswith("* [")


def test_the_memory_tool_works_after_cloudpickle() -> None:
    """The memory search tool (a closure over its retriever, a template too) cloudpickles, and the
    copy searches and issues receipts that verify."""
    from langchain_core.messages import ToolCall, ToolMessage

    from recallpack.allowance import verify

    bm25 = BM25Retriever.from_texts(TEXTS[:120], k=8)
    for template in (None, TEMPLATE, TEMPLATE_FILE):
        tool = lc.BudgetedRetriever(retriever=bm25, max_tokens=300, template=template).as_tool()
        copied = cloudpickle.loads(cloudpickle.dumps(tool))
        call = ToolCall(name="memory_search", args={"query": QUERY}, id="c1", type="tool_call")
        original, again = tool.invoke(call), copied.invoke(call)
        assert isinstance(again, ToolMessage) and again.content == original.content != ""
        assert verify(again.content, again.artifact)

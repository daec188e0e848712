"""The host-neutral pipeline: depth, lanes, fusion, Candidates and map-back, once for every host."""

from __future__ import annotations

import doctest
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import ConfigError, LaneKind, Packer
from recallpack.packing import pipeline, sources
from recallpack.packing.choosing import embedding
from recallpack.packing.pipeline import Item, ItemSettings, Pipeline, Source

MODULES = ("argparse", "json", "csv", "pathlib", "shutil", "logging", "textwrap", "difflib")
DOCS = {name: inspect.getdoc(__import__(name)) or name for name in MODULES}


def read(name: str, position: int) -> Item:
    """A host object (here a module name) read as an Item: its docstring, its name as the source."""
    return Item(DOCS[name], {"source": name})


def test_docstring_examples_run() -> None:
    """The >>> examples of the pipeline, sources and embedding modules pass."""
    for module in (pipeline, sources, embedding):
        outcome = doctest.testmod(module)
        assert outcome.failed == 0 and outcome.attempted > 0, module


def test_fused_lanes_count_an_item_once_and_map_back_to_its_own_object() -> None:
    """Two lanes that both found json: it is packed once, under the lane that ranked it best,
    with the fused score, and each kept evidence comes back with the object it came from."""
    lanes = Pipeline([Source(LaneKind.SOURCES), Source(LaneKind.FACTS)], translate=read)
    fetched = [["argparse", "json", "csv"], ["json", "shutil"]]
    outcome = lanes.recall(Packer(max_tokens=4000), "parse json", lambda depths: fetched)
    report = outcome.result.report
    assert report.candidates == 4  # json once
    assert report.items_selected + report.items_dropped + report.items_withheld == 4
    originals = [kept.original for kept in outcome.kept]
    assert originals[0] == "json" and sorted(originals) == ["argparse", "csv", "json", "shutil"]
    for kept in outcome.kept:
        assert DOCS[kept.original].startswith(kept.evidence.text.rstrip("…")[:40])
        assert kept.score is not None and kept.score > 0
    lanes_of = {entry.rank: entry.lane for entry in outcome.result.trace}
    assert lanes_of[0] == "facts"  # json: first in facts, second in sources: the best vote is facts


def test_depths_follow_fetch_k_the_budget_and_what_a_source_can_give() -> None:
    """fetch_k when given; else enough for the budget from a source's own depth; never past what
    it holds; None for a source a depth cannot reach; the report sums what was asked."""
    sources = [Source(LaneKind.SOURCES, own_depth=4, forwards=True), Source(LaneKind.FACTS, 4, True, most=3),
               Source(LaneKind.PROFILE, own_depth=4, forwards=False)]  # fmt: skip
    lanes = Pipeline(sources, translate=read)
    packer = Packer(max_tokens=2000)
    assert lanes.depths(packer) == [40, 3, None]
    assert lanes.depths(packer, fetch_k=7) == [7, 3, None]
    asked: list[list[int | None]] = []
    result = lanes.recall(packer, "q", lambda depths: asked.append(depths) or [["json"], [], []]).result
    assert asked == [[40, 3, None]] and result.report.fetch_depth is None  # one source says no depth
    two = Pipeline(sources[:2], translate=read, fetch_k=5)
    assert two.recall(packer, "q", lambda depths: [["json"], ["csv"]]).result.report.fetch_depth == 8


def test_a_bad_pipeline_is_refused_when_built() -> None:
    """Weights without lanes, a lane given twice, a fixed lane with lanes, a bad rrf_k or fetch_k."""
    with pytest.raises(ConfigError, match="weights"):
        Pipeline([Source()], translate=read, weights={"facts": 2.0})
    with pytest.raises(ConfigError, match="twice"):
        Pipeline([Source(LaneKind.FACTS), Source(LaneKind.FACTS)], translate=read)
    with pytest.raises(ConfigError, match="conflict"):
        Pipeline([Source(LaneKind.FACTS)], translate=read, items=ItemSettings(lane=LaneKind.FACTS))
    with pytest.raises(ConfigError, match="rrf_k"):
        Pipeline([Source()], translate=read, rrf_k=0)
    with pytest.raises(Exception, match="fetch_k"):
        Pipeline([Source()], translate=read, fetch_k=-1)
    with pytest.raises(ConfigError, match="lane_key"):
        ItemSettings.checked({"lane_key": ""})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(MODULES), max_size=6), min_size=1, max_size=3),
    st.integers(min_value=60, max_value=1500),
)
def test_every_item_is_accounted_for_and_each_kept_one_maps_back(
    per_lane: list[list[str]], max_tokens: int
) -> None:
    """Whatever the lanes return: each distinct item is selected, dropped or withheld once, and
    every kept evidence stands for an object its lane returned, with that object's text."""
    kinds = list(LaneKind)[: len(per_lane)]
    lanes = Pipeline([Source(kind) for kind in kinds], translate=read)
    outcome = lanes.recall(Packer(max_tokens=max_tokens, policy="skip"), None, lambda depths: per_lane)
    report = outcome.result.report
    distinct = {name for names in per_lane for name in names}
    assert report.candidates == len(distinct)
    assert report.items_selected + report.items_dropped + report.items_withheld == len(distinct)
    assert len(outcome.kept) == report.items_selected
    for kept in outcome.kept:
        assert kept.original in distinct
        assert kept.evidence.truncated or kept.evidence.text == DOCS[kept.original].strip()

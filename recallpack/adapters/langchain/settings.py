"""What every LangChain component shares: the Packer's settings as fields (``k`` as
``max_items``, LangChain's name for it), and the pipeline of the Documents it is handed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.documents import Document
from langchain_core.runnables import Runnable
from pydantic import PrivateAttr, model_validator

from recallpack.adapters.shared.components import PackerComponent, k_or_max_items
from recallpack.packing.candidate import LaneKind
from recallpack.packing.fusion import DEFAULT_RRF_K
from recallpack.packing.pipeline import Pipeline, Source

__all__ = ["LangChainComponent", "LanesSettings", "RetrieverKeywords"]


class LangChainComponent(PackerComponent):
    """Documents in, Candidates to the Packer, copies of the kept Documents out."""

    #: The host setting that fetches more of the Documents it is handed (None: none).
    _KNOB: ClassVar[str | None] = "k"
    _handed: Pipeline[Document] = PrivateAttr()

    if TYPE_CHECKING:
        # LangChain's name for max_items, so type checkers accept it as validation does; at run
        # time it is not a field: _k_is_max_items moves it to max_items.
        k: int | None = None

    @classmethod
    def _aliases(cls) -> tuple[str, ...]:
        return ("k",)

    @model_validator(mode="before")
    @classmethod
    def _k_is_max_items(cls, data: Any) -> Any:
        # LangChain's retrievers call the number of results ``k``; recallpack calls it max_items.
        if isinstance(data, dict) and "k" in data:
            data = dict(data)
            data["max_items"] = k_or_max_items(data.pop("k"), data.get("max_items", "unset"))
        return data

    @model_validator(mode="after")
    def _handed_pipeline(self) -> LangChainComponent:
        # Built once, as the Packer is: a pack of handed Documents enters the pipeline once.
        self._handed = Pipeline([Source()], items=self._items, knob=self._KNOB)
        return self


class LanesSettings(LangChainComponent):
    """What ``BudgetedRetriever.from_lanes`` takes by keyword (for type checkers)."""

    weights: Mapping[LaneKind | str, float] | None = None
    rrf_k: int = DEFAULT_RRF_K
    fetch_k: int | None = None
    name: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None


class RetrieverKeywords(LanesSettings):
    """What ``BudgetedRetriever`` takes by keyword when its upstream is given by keyword too (for
    type checkers; after a positional upstream, what ``from_lanes`` takes): its own signature,
    which pydantic's mypy plugin would otherwise replace with one of keywords only."""

    retriever: Runnable[str, list[Document]] | Callable[[str], Sequence[Document]] | None = None
    lanes: dict[LaneKind, Runnable[str, list[Document]]] | None = None

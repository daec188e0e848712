"""policy="passages" when the budget holds less than the top document: the top paragraph's focus cut
(prefix's floor) when its best passage is the best of all, the choice across documents when not."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, count_tokens, recall
from recallpack.packing.result import Outcome

FILLER = (
    "The committee met in the spring and again in the autumn of that year. "
    "Its members came from many towns along the river and the coast. "
    "Minutes were kept by a clerk who later became the town's archivist. "
    "Several of the meetings were held in the old library on the square. "
)
TOP = FILLER + "The lighthouse keeper was named Arvid Holm, and he kept the lamp for forty years. " + FILLER
OTHER = FILLER * 2
ELSEWHERE = "The lighthouse keeper Arvid Holm kept the lighthouse lamp; the lighthouse keeper lived there."


def _ranked(*texts: str) -> list[Candidate]:
    return [Candidate(text=t, metadata={"source": f"doc{i}"}) for i, t in enumerate(texts)]


def test_under_one_paragraph_the_top_ones_best_passage_is_kept_as_prefix_keeps_it() -> None:
    """The best match is in the top paragraph, which is over the budget: passages shows prefix's cut."""
    ranked = _ranked(TOP, OTHER, OTHER + " more")
    question = "who was the lighthouse keeper?"
    prefix = recall(ranked, max_tokens=60, query=question)
    passages = recall(ranked, max_tokens=60, query=question, policy="passages")
    assert [e.text for e in passages.evidence] == [e.text for e in prefix.evidence]
    assert "Arvid Holm" in passages.evidence[0].text and passages.report.policy == "passages"
    assert passages.report.tokens_used <= 60 and count_tokens(passages.to_markdown()) <= 60
    assert [t.outcome for t in passages.trace] == [Outcome.SELECTED, Outcome.DROPPED, Outcome.DROPPED]


def test_a_better_match_in_a_later_paragraph_is_still_chosen_across_documents() -> None:
    """The top paragraph names nothing asked: the choice across documents finds the later one."""
    ranked = _ranked(OTHER, OTHER + " again", ELSEWHERE)
    question = "who was the lighthouse keeper?"
    passages = recall(ranked, max_tokens=60, query=question, policy="passages")
    prefix = recall(ranked, max_tokens=60, query=question)
    assert "Arvid Holm" in passages.to_markdown() and "Arvid Holm" not in prefix.to_markdown()


def test_a_top_document_of_several_paragraphs_is_read_as_passages_not_one_cut() -> None:
    """An article (paragraphs apart by blank lines) over the budget is not cut as prefix cuts it alone."""
    article = "\n\n".join([FILLER, FILLER, "The lighthouse keeper was named Arvid Holm.", FILLER])
    ranked = _ranked(article, ELSEWHERE.replace("Arvid Holm", "a man"))
    question = "who was the lighthouse keeper?"
    passages = recall(ranked, max_tokens=80, query=question, policy="passages")
    assert len(passages.evidence) == 2  # the choice went on to the second document
    assert "Arvid Holm" in passages.evidence[0].text


@settings(max_examples=40, deadline=None)
@given(budget=st.integers(min_value=40, max_value=400), where=st.integers(min_value=0, max_value=2))
def test_every_budget_stays_exact_whichever_way_the_walk_goes(budget: int, where: int) -> None:
    """Whether the focus cut or the choice across documents is kept, the block never exceeds the budget."""
    texts = [OTHER, OTHER + " two", OTHER + " three"]
    texts[where] = TOP
    result = recall(_ranked(*texts), max_tokens=budget, query="who was the lighthouse keeper?", policy="passages")
    assert result.report.tokens_used <= budget
    assert count_tokens(result.to_markdown()) == result.report.tokens_used

"""One reading of text: every scorer (``passages``, the focus cut of every policy), the docs
search and the offline embedding read words through the analysis chain, and nowhere else."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, recall
from recallpack.packing.errors import ConfigError
from recallpack.packing.reading.analysis import Reading
from recallpack.testing import hashed_bag_of_words

PACKAGE = Path(__file__).resolve().parents[1] / "recallpack"
#: The chain itself: its tokenizer and filters (English's suffix rules are English's filter).
CHAIN = {"packing/reading/analysis.py", "packing/reading/languages.py", "packing/reading/english.py"}
#: What reads words apart from the chain on purpose, and why: a tokenizer's own pre-tokenization
#: (tiktoken's patterns, which count tokens, never match a query), and the bench's own baselines
#: (rank_bm25 retrievers, answer checks) which stand for what a user's retriever does.
NOT_WORD_MATCHING = {"packing/encodings/__init__.py"}
#: A pattern that matches words: ``\w``, an ASCII letter class, or a letter run.
WORD_PATTERN = re.compile(r"\\w|\[a-z|\\p\{L\}[+*]")


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "_bench" not in p.parts and p.name != "bench.py"]


def _strings(path: Path) -> list[str]:
    return [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_module_but_the_chain_matches_words() -> None:
    """No pattern of another module matches words, and no other module stems or calls a search
    library's own tokenizer: the focus cut had its own English matcher and a second BM25, and the
    docs search bm25s's English tokenizer."""
    offenders = []
    for path in _modules():
        where = str(path.relative_to(PACKAGE))
        if where in CHAIN or where in NOT_WORD_MATCHING:
            continue
        source = path.read_text()
        patterns = [s for s in _strings(path) if WORD_PATTERN.search(s)]
        if patterns or "stemWord" in source or "bm25s.tokenize" in source or '"Stemmer"' in source:
            offenders.append((where, patterns))
    assert offenders == []


def test_the_word_check_sees_a_matcher(tmp_path: Path) -> None:
    """A module that compiles ``\\w+`` is seen (the check above is not vacuous)."""
    module = tmp_path / "m.py"
    module.write_text('import re\nWORD = re.compile(r"\\w+")\n')
    assert [s for s in _strings(module) if WORD_PATTERN.search(s)] == [r"\w+"]


# A sentence that answers, in another form of the query's words, among sentences that do not:
# the language, the query, the answer sentence, the filler sentences, and the answer's word that
# only a match of another form finds.
CASES = [
    ("en", "packing shipments", "The crates were packed and shipped yesterday.",
     ["The weather in the valley was mild.", "Most visitors arrive by train in spring."], "packed"),
    ("ru", "какие книги читали студенты", "Студенты читали старую книгу в библиотеке.",
     ["Погода в долине была мягкой весь год.", "Большинство гостей приезжают поездом весной."], "книгу"),
    ("de", "Wann spielten die Jungen über Mittag", "Die Jungen spielen täglich draußen im Grün.",
     ["Das Wetter im Tal war mild und ruhig.", "Viele Besucher kommen im Frühling mit dem Zug."], "spielen"),
    ("es", "cuándo cantaron los niños", "Los niños cantan canciones cada mañana.",
     ["El clima en el valle fue templado todo el año.", "Muchos visitantes llegan en tren en primavera."], "cantan"),
    ("el", "ποιοι μαθητές διάβασαν τα βιβλία", "Οι μαθητών φίλοι άφησαν των βιβλίων τα κουτιά εκεί.",
     ["Ο καιρός στην κοιλάδα ήταν ήπιος όλο τον χρόνο.", "Πολλοί επισκέπτες φτάνουν με τρένο την άνοιξη."], "μαθητών"),
    ("zh", "北京大学在哪里", "北京大学位于海淀区，是一所著名的学校。",
     ["山谷里的天气一年四季都很温和。", "大多数游客在春天乘火车到达这里。"], "北京大学"),
    ("th", "มหาวิทยาลัยอยู่ที่ไหน", "มหาวิทยาลัยตั้งอยู่ใกล้แม่น้ำในเมืองหลวง",
     ["อากาศในหุบเขาอบอุ่นตลอดทั้งปี", "นักท่องเที่ยวส่วนใหญ่มาถึงโดยรถไฟในฤดูใบไม้ผลิ"], "มหาวิทยาลัย"),
    ("hi", "छात्रों ने कौन सी किताबें पढ़ीं", "छात्र पुस्तकालय में पुरानी किताब पढ़ते हैं।",
     ["घाटी का मौसम पूरे साल हल्का रहा।", "अधिकांश यात्री वसंत में ट्रेन से आते हैं।"], "किताब"),
]


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(CASES), before=st.integers(4, 12), after=st.integers(0, 12))
def test_every_policy_finds_the_same_matching_sentence(
    case: tuple[str, str, str, list[str], str], before: int, after: int
) -> None:
    """truncate, prefix (its floor's focus cut) and passages agree on which words of a text match
    the query, in every language: with room for a few sentences of a document that does not fit,
    each keeps the passage that holds the query's words in another form ("packing" finds
    "packed"; truncate and prefix lost it to their own English matcher)."""
    _, query, answer, fillers, word = case
    order = [fillers[i % 2] for i in range(before)] + [answer] + [fillers[(i + 1) % 2] for i in range(after)]
    text = ("" if case[0] == "zh" else " ").join(order)
    document = Candidate(text=text, metadata={"source": "notes.txt"})
    other = Candidate(text=" ".join(fillers * 6), metadata={"source": "other.txt"})
    for policy in ("truncate", "prefix", "passages"):
        result = recall([document, other], query=query, max_tokens=60, policy=policy, tokenizer="o200k_base")
        kept = "".join(item.text for item in result.evidence)
        assert word in kept, (policy, kept)


@pytest.mark.parametrize(("language", "query", "text"), [(c[0], c[1], c[2]) for c in CASES])
def test_the_query_and_the_text_share_index_keys(language: str, query: str, text: str) -> None:
    """What an index stores for the answer shares a key with the query read by the same chain,
    in every language (the docs search finds the text packing then reads)."""
    reading = Reading.of("auto", query, text)
    assert reading.language == (None if language in ("zh", "th") else language)
    assert set(reading.keys(query)) & set(reading.keys(text))


SCRIPTS = {
    "Latin": "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Cyrillic": "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Greek": "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Arabic": "الثعلب البني السريع يقفز فوق الكلب الكسول.",
    "Hebrew": "השועל החום המהיר קופץ מעל הכלב העצלן.",
    "Devanagari": "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।",
    "Han": "敏捷的棕色狐狸跳过了懒狗。",
    "Kana": "すばやい茶色の狐がのろまな犬を飛び越える。",
    "Hangul": "빠른 갈색 여우가 게으른 개를 뛰어넘는다.",
    "Thai": "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ",
    "Tamil": "விரைவான பழுப்பு நரி சோம்பேறி நாயின் மேல் குதிக்கிறது.",
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_offline_embedding_reads_every_script(script: str) -> None:
    """HashingEmbeddings' vector of a text in any script is not zero, and is nearest to a text
    sharing its words (it was zero for any text without ASCII letters, and a vector store
    over Russian text raised NaN on its first query)."""
    text = SCRIPTS[script]
    vector = hashed_bag_of_words(text)
    assert math.isclose(sum(v * v for v in vector), 1.0)
    others = [t for s, t in SCRIPTS.items() if s != script]
    near = sum(a * b for a, b in zip(vector, hashed_bag_of_words(text[: len(text) // 2])))
    assert all(near > sum(a * b for a, b in zip(vector, hashed_bag_of_words(o))) for o in others)


def test_the_offline_embedding_refuses_auto() -> None:
    """``language='auto'`` would read a short query and its texts as two languages: refused with
    the field named; a named language matches inflections."""
    with pytest.raises(ConfigError) as caught:
        hashed_bag_of_words("x", language="auto")
    assert caught.value.field == "language"
    a, b = hashed_bag_of_words("книги", language="ru"), hashed_bag_of_words("книга", language="ru")
    assert math.isclose(sum(x * y for x, y in zip(a, b)), 1.0)


def test_a_vector_store_over_russian_text_answers() -> None:
    """A LangChain vector store over Russian text with HashingEmbeddings finds the text that
    shares the query's words (it raised on NaN)."""
    vectorstores = pytest.importorskip("langchain_core.vectorstores")
    from recallpack.testing import HashingEmbeddings

    store = vectorstores.InMemoryVectorStore(HashingEmbeddings())
    store.add_texts([SCRIPTS["Cyrillic"], "Москва — столица России.", "Погода весной мягкая."])
    (found,) = store.similarity_search("столица России", k=1)
    assert found.page_content == "Москва — столица России."

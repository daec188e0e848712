"""Text in every script: words keep their marks, every script's sentence ends split, scripts
without spaces match by pairs of characters, inflections match by the language's own stemmer,
and the budget stays exact on the rendered block whatever the script."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import Candidate, ConfigError, Packer, RecallpackError, count_tokens, recall
from recallpack.packing.choosing.cuts import cut_focus
from recallpack.packing.reading import languages
from recallpack.packing.reading.analysis import Reading, check_language, language_of, phrase_letters
from recallpack.packing.reading.units import LEAST_PHRASE_CHARS, split_units
from recallpack.packing.tokenizers import get_tokenizer

XQUAD = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "xquad-12-languages-dev-12-articles.json.gz"


@lru_cache(maxsize=1)
def xquad() -> dict[str, list[dict[str, Any]]]:
    """XQuAD's articles by language (benchmarks/data, CC BY-SA 4.0): real text in 12 languages."""
    with gzip.open(XQUAD, "rt", encoding="utf-8") as handle:
        languages: dict[str, list[dict[str, Any]]] = json.load(handle)["languages"]
    return languages


def units_of(text: str) -> list[str]:
    starts, ends = split_units(text, 600, 250)
    return [text[s:e] for s, e in zip(starts, ends)]


# --- units -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("पहला वाक्य है। दूसरा वाक्य है।", ["पहला वाक्य है।", "दूसरा वाक्य है।"]),  # danda
        ("هل هذا سؤال؟ نعم هذا سؤال.", ["هل هذا سؤال؟", "نعم هذا سؤال."]),  # Arabic question mark
        ("Սա առաջինն է։ Սա երկրորդն է։", ["Սա առաջինն է։", "Սա երկրորդն է։"]),  # Armenian full stop
        ("ይህ አንድ ነው። ይህ ሁለት ነው።", ["ይህ አንድ ነው።", "ይህ ሁለት ነው።"]),  # Ethiopic full stop
        ("ဒါက ပထမ ။ဒါက ဒုတိယ ။", ["ဒါက ပထမ ။", "ဒါက ဒုတိယ ။"]),  # Myanmar section mark
        ("第一句．第二句．", ["第一句．", "第二句．"]),  # fullwidth full stop
        ("这是第一句。这是第二句！", ["这是第一句。", "这是第二句！"]),
    ],
)
def test_every_scripts_sentence_terminal_ends_a_unit(text: str, expected: list[str]) -> None:
    """A sentence terminal of any script (Unicode's Sentence_Terminal) ends a unit."""
    assert units_of(text) == expected


def test_a_space_between_thai_letters_ends_a_phrase_of_some_length() -> None:
    """Thai writes no terminator: a space between two Thai letters ends a unit once the unit
    holds LEAST_PHRASE_CHARS (a space also sets apart numbers and short clauses)."""
    text = xquad()["th"][0]["paragraphs"][0]["text"].strip()
    found = units_of(text)
    assert len(found) > 3
    assert "".join("".join(u.split()) for u in found) == "".join(text.split())  # only spaces dropped
    for unit in found[:-1]:
        assert len(unit) >= LEAST_PHRASE_CHARS or unit[-1] not in phrase_letters()
    assert units_of("แมวนอนบนเสื่อ หมากินข้าว") == ["แมวนอนบนเสื่อ หมากินข้าว"]


def test_ascii_full_stops_still_need_a_space() -> None:
    """"3.14" and "e.g." stay whole: only other scripts' terminals end a unit without a space."""
    assert units_of("Pi is 3.14 or so. Next one.") == ["Pi is 3.14 or so.", "Next one."]


# --- words and terms ---------------------------------------------------------------------------


def test_a_hindi_word_keeps_its_vowel_signs() -> None:
    """A word of an Indic script is one term with its marks, not a letter between each sign."""
    assert Reading(None).terms("किताब पढ़ो") == ["किताब", "पढ़ो"]
    assert Reading("hi").hits("मैंने किताबें पढ़ीं", ["किताबें"], 10) == {"किताबें": [6]}


def test_a_script_without_spaces_is_read_by_pairs_of_characters() -> None:
    """A Chinese run is its overlapping pairs; a Latin word among them stays a word."""
    assert Reading(None).terms("iPhone的价格") == ["iphone", "的价", "价格"]
    text = "苹果手机的价格很高。"
    assert Reading(None).hits(text, ["价格"], 10) == {"价格": [5]}


def test_thai_pairs_are_of_grapheme_clusters() -> None:
    """A Thai pair never splits a consonant from its vowel or tone mark."""
    for gram in Reading(None).terms("น้ำแข็ง"):
        assert gram[0] not in "\u0e31\u0e34\u0e35\u0e36\u0e37\u0e38\u0e39\u0e47\u0e48\u0e49\u0e4a\u0e4b"


@pytest.mark.parametrize(
    ("language", "query", "text", "found"),
    [
        ("ru", "книгами", "я читал эти книги вчера", True),
        ("el", "ανθρώπων", "ο άνθρωπος ήρθε", True),
        ("de", "Häusern", "das haus ist alt", True),
        ("tr", "kitapları", "bu kitap güzel", True),
        ("es", "canciones", "una canción nueva", True),
        ("ru", "книгами", "я читал эти статьи", False),
        ("ar", "الدفاع", "خطة للدفاع عن المدينة", True),  # the stemmer takes "لل" off: found inside
    ],
)
def test_inflected_forms_match_by_the_languages_stemmer(language: str, query: str, text: str, found: bool) -> None:
    """A word in another form of the same stem is found; another word is not."""
    reading = Reading(language)
    (term,) = reading.terms(query)
    assert bool(reading.hits(text.lower(), [term], 10)) is found


def test_english_suffix_rules_never_read_another_language() -> None:
    """English matches "played" in "playing" by its suffix rules; words with no stemmer, or
    another language's stemmer, do not: the rules read English alone."""
    text = "he was playing."
    assert Reading("en").hits(text, ["played"], 10) == {"played": [7]}
    assert Reading("en").english and not Reading(None).english and not Reading("es").english
    assert Reading(None).hits(text, ["played"], 10) == {}
    assert Reading("es").hits(text, ["played"], 10) == {}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How many points did the defense give up?", "en"),
        ("Сколько очков уступила защита?", "ru"),
        ("Πόσους πόντους έδωσε η άμυνα;", "el"),
        ("كم نقطة تخلى عنها الدفاع؟", "ar"),
        ("डिफ़ेंस ने कितने अंक दिए?", "hi"),
        ("Savunması kaç sayı bıraktı?", "tr"),
        ("黑豹队的防守丢了多少分？", None),
        ("ทีมรับของแพนเธอร์สเสียกี่แต้ม", None),
        ("Đội phòng thủ đã thua bao nhiêu điểm?", None),
        ("چند امتیاز از دست داد؟", None),  # Persian: no stemmer, not Arabic's
    ],
)
def test_the_language_is_read_from_the_querys_script_and_letters(query: str, expected: str | None) -> None:
    """The query's script names the language; letters only one language uses tell Latin ones apart."""
    assert language_of(query) == expected


@pytest.mark.parametrize("language", ["de", "es", "ro", "tr"])
def test_a_latin_language_is_read_from_its_texts_letters(language: str) -> None:
    """A Latin-script question is read in the language its documents' letters name."""
    paragraph = xquad()[language][0]["paragraphs"][0]
    assert language_of(paragraph["qas"][0]["question"], [paragraph["text"]]) == language


def test_a_few_foreign_names_leave_english_english() -> None:
    """"Zürich" and "José" in English text do not make it German or Spanish."""
    text = (
        "José Martínez moved to Zürich in 1990. He worked there for ten years as an engineer at a "
        "firm that built bridges and tunnels across the Alps, and he later taught at the technical "
        "university, where his lectures on structural design drew students from all over Europe. "
        "After retiring he wrote two books about the history of engineering in Switzerland."
    )
    assert language_of("Where did he move?", [text]) == "en"


# --- the setting -------------------------------------------------------------------------------


@pytest.mark.parametrize(("given_", "code"), [("ru", "ru"), ("Russian", "ru"), ("pt-BR", "pt"), ("auto", "auto"), (None, None)])
def test_language_accepts_codes_and_stemmer_names(given_: str | None, code: str | None) -> None:
    """An ISO 639-1 code, a Snowball name, a locale, "auto" or None."""
    assert Packer(language=given_).language == code


@pytest.mark.parametrize("bad", ["klingon", "xx", "", 5, ["ru"]])
def test_an_unknown_language_is_a_clear_error(bad: object) -> None:
    """Anything else names the field and what is allowed."""
    with pytest.raises(ConfigError, match="language=") as caught:
        Packer(language=bad)
    assert caught.value.field == "language"


def test_a_close_misspelling_is_named() -> None:
    """A near miss names the closest language."""
    with pytest.raises(ConfigError, match="did you mean 'russian'"):
        check_language("russain")


def test_a_stemmer_that_is_not_installed_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PyStemmer without the language's stemmer is named, with the fix."""
    import Stemmer

    monkeypatch.setattr(Stemmer, "algorithms", lambda: ["english"])
    monkeypatch.setattr(languages, "_STEMMERS", type(languages._STEMMERS)())
    with pytest.raises(ConfigError, match="has no 'greek' stemmer.*pip install -U PyStemmer"):
        Packer(language="el")


def test_text_that_is_not_unicode_is_a_clear_error() -> None:
    """Bytes for a query or a text are refused, naming the field."""
    with pytest.raises(ConfigError, match="query=") as caught:
        recall([Candidate(text="книги")], query=b"\xff", max_tokens=64, policy="passages")  # type: ignore[arg-type]
    assert caught.value.field == "query"
    with pytest.raises(RecallpackError, match="text must be a str"):
        Candidate(text=b"\xff\xfe")  # type: ignore[arg-type]


def test_lone_surrogates_are_read_as_no_word() -> None:
    """A lone surrogate (from JSON) in the query or a text matches nothing and breaks nothing."""
    result = recall([Candidate(text="книги \ud800 книги. Другое.")], query="книгами \udfff",
                    max_tokens=30, policy="passages", language="ru")
    assert "книги" in result.to_markdown()
    result.to_markdown().encode("utf-8")


# --- the budget and the bytes, in every script ------------------------------------------------

SCRIPT_SAMPLES = st.sampled_from(
    [
        "Հայաստանը լեռնային երկիր է։ Նրա մայրաքաղաքը Երևանն է։",
        "ኢትዮጵያ በአፍሪካ ቀንድ የምትገኝ አገር ናት። ዋና ከተማዋ አዲስ አበባ ናት።",
        "မြန်မာနိုင်ငံသည် အရှေ့တောင်အာရှတွင် ရှိသည်။ မြို့တော်မှာ နေပြည်တော် ဖြစ်သည်။",
        "ព្រះរាជាណាចក្រកម្ពុជា ស្ថិតនៅអាស៊ីអាគ្នេយ៍។ រាជធានីគឺភ្នំពេញ។",
        "ປະເທດລາວ ຕັ້ງຢູ່ໃນອາຊີຕາເວັນອອກສຽງໃຕ້ ນະຄອນຫຼວງແມ່ນວຽງຈັນ",
        "日本の首都は東京です。東京は大きな都市です！",
        "தமிழ்நாடு இந்தியாவின் ஒரு மாநிலம். அதன் தலைநகரம் சென்னை.",
        "বাংলাদেশ দক্ষিণ এশিয়ার একটি দেশ। এর রাজধানী ঢাকা।",
        "👩‍👩‍👧 family e\u0301te\u0301 ﷽ 🇺🇳 done.",
    ]
)


def xquad_paragraphs() -> st.SearchStrategy[tuple[str, list[str]]]:
    """A question and paragraphs of one XQuAD language."""

    def draw(language: str, article: int) -> tuple[str, list[str]]:
        paragraphs = xquad()[language][article % 12]["paragraphs"]
        return paragraphs[0]["qas"][0]["question"], [p["text"] for p in paragraphs]

    return st.builds(draw, st.sampled_from(sorted(xquad())), st.integers(0, 11))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=xquad_paragraphs(),
    extra=st.lists(SCRIPT_SAMPLES, max_size=3),
    budget=st.integers(40, 700),
    policy=st.sampled_from(["passages", "prefix", "truncate", "skip"]),
    spec=st.sampled_from(["cl100k_base", "o200k_base", "chars"]),
)
def test_the_block_is_exact_in_every_script(
    drawn: tuple[str, list[str]], extra: list[str], budget: int, policy: str, spec: str
) -> None:
    """Any script, any policy: the block's count is the report's, within the budget, and the
    same input gives the same bytes."""
    query, paragraphs = drawn
    candidates = [Candidate(text=t) for t in [*paragraphs[:4], *extra]]
    tok = get_tokenizer(spec)
    result = recall(candidates, query=query, max_tokens=budget, policy=policy, tokenizer=tok)
    block = result.to_markdown()
    assert tok.count(block) == result.report.tokens_used <= budget
    again = recall(candidates, query=query, max_tokens=budget, policy=policy, tokenizer=get_tokenizer(spec))
    assert again.to_markdown() == block


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(SCRIPT_SAMPLES, min_size=1, max_size=6).map(" ".join), query=SCRIPT_SAMPLES, room=st.integers(1, 120))
def test_a_focus_cut_fits_in_every_script(text: str, query: str, room: int) -> None:
    """The focus cut of any script's text fits its room and keeps slices of the text in order."""
    tok = get_tokenizer("cl100k_base")
    cut = cut_focus(text, query, room, tok)
    if cut is None:
        return
    assert tok.count(cut.text) <= room
    previous = 0
    for start, end in cut.spans:
        assert previous <= start < end <= len(text)
        previous = end


@pytest.mark.parametrize("language", ["hi", "th", "zh", "ru", "ar", "el", "de", "vi"])
def test_passages_reach_an_answer_below_the_first_document_in_every_language(language: str) -> None:
    """Real XQuAD questions whose paragraph is ranked second, after another of its article, at
    400 tokens: passages keeps the answer for most of them, where prefix keeps few."""
    kept = {"passages": 0, "prefix": 0}
    asked = 0
    for article in xquad()[language][:2]:
        paragraphs = article["paragraphs"]
        for i, paragraph in enumerate(paragraphs):
            ranked = [Candidate(text=paragraphs[(i + 1) % len(paragraphs)]["text"]), Candidate(text=paragraph["text"])]
            for qa in paragraph["qas"]:
                asked += 1
                for policy in kept:
                    result = recall(ranked, query=qa["question"], max_tokens=400, policy=policy)
                    assert count_tokens(result.to_markdown()) == result.report.tokens_used <= 400
                    shown = "\n".join(e.text for e in result.evidence)
                    kept[policy] += any(answer in shown for answer in qa["answers"])
    assert kept["passages"] >= 0.75 * asked, (kept, asked)
    assert kept["passages"] >= kept["prefix"] + 0.25 * asked, (kept, asked)

"""``recallpack serve --docs``: the search reads every language through the analysis chain, its
call's work follows the budget, and its index build can show progress."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("bm25s")
pytest.importorskip("mcp")

from recallpack import Packer
from recallpack.adapters.mcp import docs as mcp_docs
from recallpack.adapters.mcp.docs import FETCH_BUDGETS, LEAST_FETCH, DocsIndex
from recallpack.cli import main

#: A folder in each language: the file that answers, and two that do not. The query asks in
#: another form of the answer's words (or, without spaces, in words that run together).
FOLDERS = {
    "zh": ("北京大学在哪里", "北京大学位于海淀区，是一所著名的学校。", ["山谷里的天气一年四季都很温和。", "大多数游客在春天乘火车到达这里。"]),
    "ja": ("東京大学はどこにありますか", "東京大学は文京区にある有名な大学です。", ["谷の天気は一年中穏やかでした。", "ほとんどの旅行者は春に電車で到着します。"]),
    "th": ("มหาวิทยาลัยอยู่ที่ไหน", "มหาวิทยาลัยตั้งอยู่ใกล้แม่น้ำในเมืองหลวง", ["อากาศในหุบเขาอบอุ่นตลอดทั้งปี", "นักท่องเที่ยวส่วนใหญ่มาถึงโดยรถไฟในฤดูใบไม้ผลิ"]),
    "ru": ("какие книги читали студенты", "Студенты читали старую книгу в библиотеке.", ["Погода в долине была мягкой весь год.", "Большинство гостей приезжают поездом весной."]),
    "hi": ("छात्रों ने कौन सी किताबें पढ़ीं", "छात्र पुस्तकालय में पुरानी किताब पढ़ते हैं।", ["घाटी का मौसम पूरे साल हल्का रहा।", "अधिकांश यात्री वसंत में ट्रेन से आते हैं।"]),
    "en": ("packing shipments", "The crates were packed and shipped yesterday.", ["The weather in the valley was mild.", "Most visitors arrive by train in spring."]),
}


def _folder(root: Path, language: str) -> Path:
    query, answer, others = FOLDERS[language]
    root.mkdir(parents=True, exist_ok=True)
    (root / "answer.md").write_text(answer + "\n", encoding="utf-8")
    for i, text in enumerate(others):
        (root / f"other{i}.md").write_text(text + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("language", sorted(FOLDERS))
def test_the_answering_file_ranks_first_in_every_language(tmp_path: Path, language: str) -> None:
    """The query finds the file that answers it, first, in Chinese, Japanese and Thai (no spaces
    between words) and in inflected forms (Russian "книги" finds "книгу"): bm25s's English
    tokenizer found nothing in Chinese or Japanese."""
    index = DocsIndex(_folder(tmp_path / language, language), Packer(), window_tokens=50, overlap_tokens=0)
    found = index.matches(FOLDERS[language][0], None, 500)
    assert found and found[0].metadata["source"] == "answer.md"


def test_the_folder_is_read_in_one_language_chosen_from_its_text(tmp_path: Path) -> None:
    """auto reads the folder's language from its files' text; a code or None is taken as given."""
    folder = _folder(tmp_path / "ru", "ru")
    assert DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0).reading.language == "ru"
    assert DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0, language=None).reading.language is None
    assert DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0, language="russian").reading.language == "ru"


def test_a_language_change_rebuilds_the_stored_index(tmp_path: Path) -> None:
    """The chain's signature is among the index's settings: another language reuses nothing."""
    folder = _folder(tmp_path / "ru", "ru")
    store = tmp_path / "idx"
    DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0, index=store)
    assert DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0, index=store).reused == 3
    other = DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0, index=store, language=None)
    assert other.reused == 0 and other.warning() is None  # a setting changed: no damage to warn of


def _many(root: Path, files: int) -> Path:
    root.mkdir()
    for n in range(files):
        (root / f"page{n:05d}.md").write_text(f"# Page {n}\n\nThe gazelle {n} runs across the plain.\n")
    return root


@pytest.mark.parametrize("budget", [200, 2048])
def test_a_calls_candidates_do_not_grow_with_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """A query that matches every file builds as many candidates over 600 files as over 60, for the
    same budget: no more than the default fetch_k (a few budgets of windows), never one a file."""
    built: list[str] = []
    made = mcp_docs.file_candidate

    def counting(name: str, *args: Any) -> Any:
        built.append(name)
        return made(name, *args)

    monkeypatch.setattr(mcp_docs, "file_candidate", counting)
    counts = []
    for files in (60, 600):
        index = DocsIndex(_many(tmp_path / str(files), files), Packer(), window_tokens=200, overlap_tokens=20)
        built.clear()
        assert index.matches("gazelle plain", None, budget)
        counts.append(len(built))
    limit = max(LEAST_FETCH, -(-FETCH_BUDGETS * budget // 200))
    assert counts[0] == counts[1] <= limit < 60


def test_an_explicit_fetch_k_is_kept(tmp_path: Path) -> None:
    """fetch_k given: that many windows are ranked, whatever the budget."""
    index = DocsIndex(_many(tmp_path / "docs", 40), Packer(), window_tokens=200, overlap_tokens=20)
    assert len(index.matches("gazelle", 25, 100)) == 25
    assert len(index.search("gazelle")) == 40  # search() without a limit: every match


def test_the_best_windows_are_the_full_rankings_first(tmp_path: Path) -> None:
    """Ranking only the best k gives exactly the first k of the full ranking, ties in file order."""
    index = DocsIndex(_many(tmp_path / "docs", 30), Packer(), window_tokens=200, overlap_tokens=20)
    every = [c.metadata["source"] for c in index.search("gazelle 7 plain")]
    for k in (1, 5, 12, 29):
        assert [c.metadata["source"] for c in index.search("gazelle 7 plain", k)] == every[:k]


def test_progress_is_drawn_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """show_progress=True draws tqdm's bar on stderr; a library call draws nothing by default."""
    pytest.importorskip("tqdm")
    folder = _many(tmp_path / "docs", 20)
    DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0)
    assert capsys.readouterr().err == ""
    DocsIndex(folder, Packer(), window_tokens=50, overlap_tokens=0, show_progress=True)
    assert "recallpack: indexing" in capsys.readouterr().err


def test_progress_without_tqdm_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Without tqdm installed, show_progress builds the index and draws nothing."""
    import importlib

    real = importlib.import_module

    def no_tqdm(name: str, *args: Any) -> Any:
        if name == "tqdm":
            raise ImportError("No module named 'tqdm'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_tqdm)
    index = DocsIndex(_many(tmp_path / "docs", 5), Packer(), window_tokens=50, overlap_tokens=0, show_progress=True)
    assert index.search("gazelle") and capsys.readouterr().err == ""


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Stand in for serve(): record the source instead of serving on this stdin."""
    import recallpack.adapters.mcp as mcp_adapter

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(mcp_adapter, "serve", lambda source, **kw: calls.append({"source": source, **kw}))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return calls


def test_serve_language_flag_reads_the_folder_so(
    tmp_path: Path, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """--language none and --language ru are served; an unknown code is one line and exit 2."""
    folder = str(_folder(tmp_path / "ru", "ru"))
    for value in ("none", "ru", "auto"):
        assert main(["serve", "--docs", folder, "--language", value]) == 0
    capsys.readouterr()
    code = main(["serve", "--docs", folder, "--language", "klingon"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--language 'klingon' is not auto, none" in err
    assert main(["serve", "--retriever", "tests.adapters.mcp_factories:slow", "--language", "ru"]) == 2
    assert "--language is for --docs" in capsys.readouterr().err


def test_serve_progress_flag_draws_the_bar(
    tmp_path: Path, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """--progress draws the index build's bar on stderr (stderr is no terminal here: without the
    flag, none)."""
    pytest.importorskip("tqdm")
    folder = str(_many(tmp_path / "docs", 10))
    assert main(["serve", "--docs", folder]) == 0
    assert "recallpack: indexing" not in capsys.readouterr().err
    assert main(["serve", "--docs", folder, "--progress"]) == 0
    assert "recallpack: indexing" in capsys.readouterr().err

"""``recallpack serve --docs DIR --index DIR``: an index that lasts, and is never trusted stale."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("bm25s")

from recallpack import Packer
from recallpack.adapters.mcp.docs import DocsIndex


def _index(docs: Path, store: Path, window: int = 50) -> DocsIndex:
    return DocsIndex(docs, Packer(), window_tokens=window, overlap_tokens=10, index=store)


def _found(index: DocsIndex, query: str) -> set[str]:
    return {c.artifact_id or "" for c in index.search(query)}


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for n in range(6):
        (root / f"page{n}.md").write_text(f"# Page {n}\n\nThe gazelle number {n} runs across the plain.\n")
    (root / "scoped.md").write_text("---\nscope_ids: [org-a]\n---\nThe heron waits by the river.\n")
    return root


def test_a_warm_start_reuses_every_file_and_finds_the_same(docs: Path, tmp_path: Path) -> None:
    """A second start over the same files takes every file from the index and answers the same."""
    cold = _index(docs, tmp_path / "idx")
    warm = _index(docs, tmp_path / "idx")
    assert (cold.reused, warm.reused) == (0, 7)
    assert warm.candidates == cold.candidates
    assert [c.metadata["chunk_id"] for c in warm.search("gazelle plain")] == [
        c.metadata["chunk_id"] for c in cold.search("gazelle plain")
    ]
    assert "7 unchanged" in warm.summary()


def test_a_changed_file_is_reindexed_and_only_it(docs: Path, tmp_path: Path) -> None:
    """A changed file's new text is found and its old text is not; the others are reused."""
    _index(docs, tmp_path / "idx")
    (docs / "page2.md").write_text("# Page 2\n\nThe okapi hides in the forest.\n")
    warm = _index(docs, tmp_path / "idx")
    assert warm.reused == 6
    assert _found(warm, "okapi forest") == {"page2.md"}
    assert "page2.md" not in _found(warm, "gazelle")
    assert _found(warm, "gazelle") == {f"page{n}.md" for n in (0, 1, 3, 4, 5)}
    assert _index(docs, tmp_path / "idx").reused == 7  # the store was rewritten with the change


def test_a_restart_after_changes_ranks_as_a_fresh_index_does(docs: Path, tmp_path: Path) -> None:
    """After a change, an addition and a removal, the reused index ranks every window as an index
    built from nothing over the same files (BM25's weights are the whole corpus's)."""
    _index(docs, tmp_path / "idx")
    (docs / "page1.md").write_text("# Page 1\n\nThe gazelle and the okapi share the plain.\n")
    (docs / "page5.md").unlink()
    (docs / "more.md").write_text("A gazelle, a gazelle, and a heron by the plain.\n")
    warm = _index(docs, tmp_path / "idx")
    fresh = DocsIndex(docs, Packer(), window_tokens=50, overlap_tokens=10)
    assert warm.reused == 5 and warm.candidates == fresh.candidates
    for query in ("gazelle plain", "okapi", "heron river", "page", "number 3 runs"):
        assert [c.metadata["chunk_id"] for c in warm.search(query)] == [
            c.metadata["chunk_id"] for c in fresh.search(query)
        ]


def test_a_removed_file_is_gone_and_an_added_one_found(docs: Path, tmp_path: Path) -> None:
    """A file removed since the index was saved is not found; one added is."""
    _index(docs, tmp_path / "idx")
    (docs / "page4.md").unlink()
    (docs / "new.md").write_text("The ibis wades.\n")
    warm = _index(docs, tmp_path / "idx")
    assert "page4.md" not in _found(warm, "gazelle") and _found(warm, "ibis") == {"new.md"}
    assert all(c.artifact_id != "page4.md" for c in warm.candidates) and warm.reused == 6


def test_front_matter_is_read_again_at_every_start(docs: Path, tmp_path: Path) -> None:
    """A file whose front matter changed is gated by its new scopes, never by the stored ones."""
    _index(docs, tmp_path / "idx")
    (docs / "scoped.md").write_text("---\nscope_ids: [org-b]\n---\nThe heron waits by the river.\n")
    warm = _index(docs, tmp_path / "idx")
    [heron] = warm.search("heron river")
    assert heron.scope_ids == ("org-b",)


def test_a_changed_setting_rebuilds_everything(docs: Path, tmp_path: Path) -> None:
    """Other window sizes (or another encoding) reuse nothing of the stored index."""
    _index(docs, tmp_path / "idx")
    other = _index(docs, tmp_path / "idx", window=40)
    assert other.reused == 0 and _found(other, "gazelle")
    assert _index(docs, tmp_path / "idx", window=40).reused == 7


@pytest.mark.parametrize(
    "damage",
    ["manifest.json", "words.npz", "bm25/params.index.json", "bm25/data.csc.index.npy", "truncate",
     "a record", "the vocabulary"],
)
def test_a_corrupt_index_is_rebuilt_with_a_warning(
    docs: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A store with a part garbled or cut short is rebuilt (with a warning), never a crash."""
    store = tmp_path / "idx"
    _index(docs, store)
    manifest = store / "manifest.json"
    if damage == "truncate":
        manifest.write_bytes(manifest.read_bytes()[:100])
    elif damage in ("a record", "the vocabulary"):
        stored = json.loads(manifest.read_text())
        if damage == "a record":
            stored["files"]["page0.md"] = ["not", "a", "record"]
        else:
            stored["vocab"][1] = stored["vocab"][0]  # two ids for one word
        manifest.write_text(json.dumps(stored))
    else:
        (store / damage).write_bytes(b"\x00garbage{")
    with caplog.at_level(logging.WARNING, logger="recallpack.mcp"):
        rebuilt = _index(docs, store)
    assert "rebuilding it" in caplog.text
    assert _found(rebuilt, "gazelle") == {f"page{n}.md" for n in range(6)}
    assert _index(docs, store).reused == 7


def test_an_index_path_that_is_a_file_is_refused(docs: Path, tmp_path: Path) -> None:
    """--index naming a file is a ConfigError saying to give a folder."""
    from recallpack import ConfigError

    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="give a folder"):
        _index(docs, tmp_path / "file")


def test_serve_with_index_restarts_on_the_changed_files(docs: Path, tmp_path: Path) -> None:
    """serve --docs --index through the SDK's client: the second start reuses the unchanged files,
    says so, and recall finds a changed file's new text, not its old."""
    pytest.importorskip("mcp")
    from tests.adapters.mcp_host import connect

    args = ("--docs", str(docs), "--index", str(tmp_path / "idx"), "--reader", "u-1")
    with connect(*args) as host:
        assert "0 unchanged" in host.stderr()
        assert "page3.md" in host.recall({"query": "gazelle plain"}).content[0].text  # type: ignore[union-attr]
    (docs / "page3.md").write_text("# Page 3\n\nThe okapi hides in the forest.\n")
    with connect(*args) as host:
        assert "6 unchanged since the index" in host.stderr()
        found = host.recall({"query": "okapi forest"}).content[0].text  # type: ignore[union-attr]
        assert "page3.md" in found and "okapi" in found
        assert "page3.md" not in host.recall({"query": "gazelle plain"}).content[0].text  # type: ignore[union-attr]


def test_a_folder_of_other_files_is_refused_and_left_alone(docs: Path, tmp_path: Path) -> None:
    """--index naming a folder that holds anything but an index is a ConfigError, and its files
    are untouched (the index folder is replaced whole when saved)."""
    from recallpack import ConfigError

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="holds other files"):
        _index(docs, mine)
    assert (mine / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "mine"]


def test_saving_leaves_nothing_beside_the_index(docs: Path, tmp_path: Path) -> None:
    """A cold start and a changed restart each leave the index folder alone beside the docs."""
    _index(docs, tmp_path / "idx")
    (docs / "page0.md").write_text("changed\n")
    _index(docs, tmp_path / "idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "idx"]
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["bm25", "manifest.json", "words.npz"]


def _calls_work(index: DocsIndex) -> None:
    """Every kind of call on ``index`` answers: a search, a file's matches, every candidate."""
    assert _found(index, "gazelle") == {f"page{n}.md" for n in range(6)}
    assert {c.metadata["source"] for c in index.matches("gazelle plain", None, 500)} >= {"page0.md"}
    assert len(index.candidates) == 7


def test_a_words_file_cut_short_is_rebuilt_with_a_warning(docs: Path, tmp_path: Path) -> None:
    """A words.npz cut short (BadZipFile when read) is rebuilt with a warning: the server starts."""
    store = tmp_path / "idx"
    _index(docs, store)
    words = store / "words.npz"
    words.write_bytes(words.read_bytes()[: len(words.read_bytes()) // 2])
    rebuilt = _index(docs, store)
    assert rebuilt.reused == 0 and "words.npz" in (rebuilt.warning() or "")
    _calls_work(rebuilt)
    assert _index(docs, store).warning() is None


@pytest.mark.parametrize("token_count", ["12", None, 1.5, -3, True, [1]])
def test_a_stored_window_that_is_not_numbers_is_rebuilt(docs: Path, tmp_path: Path, token_count: object) -> None:
    """A stored window whose token count is not a whole number is seen on load and rebuilt, so
    no call fails (a string passed the load checks, then every matching call raised TypeError)."""
    store = tmp_path / "idx"
    _index(docs, store)
    manifest = store / "manifest.json"
    stored = json.loads(manifest.read_text())
    stored["files"]["page0.md"]["windows"][0][2] = token_count
    manifest.write_text(json.dumps(stored))
    rebuilt = _index(docs, store)
    assert rebuilt.reused == 0 and "rebuilding it" in (rebuilt.warning() or "")
    _calls_work(rebuilt)


def test_another_folders_bm25_index_is_not_used(docs: Path, tmp_path: Path) -> None:
    """A larger BM25 index of another folder copied into this index is seen and rebuilt (it passed
    the load checks, then every matching call raised IndexError)."""
    import shutil

    other = tmp_path / "other"
    other.mkdir()
    for n in range(40):
        (other / f"o{n}.md").write_text(f"The gazelle {n} of another folder, and the plain.\n" * 3)
    _index(other, tmp_path / "other-idx")
    store = tmp_path / "idx"
    _index(docs, store)
    shutil.rmtree(store / "bm25")
    shutil.copytree(tmp_path / "other-idx" / "bm25", store / "bm25")
    rebuilt = _index(docs, store)
    assert "BM25 index" in (rebuilt.warning() or "") and rebuilt.reused == 7
    _calls_work(rebuilt)
    assert _index(docs, store).warning() is None


def test_another_folders_index_is_not_this_ones(docs: Path, tmp_path: Path) -> None:
    """A whole index of another folder given as --index reuses none of its files."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "page0.md").write_text("The okapi of another folder.\n")
    _index(other, tmp_path / "idx")
    index = _index(docs, tmp_path / "idx")
    assert index.reused == 0
    _calls_work(index)


def test_a_missing_part_is_rebuilt_with_one_warning_line_on_stderr(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """serve --docs --index with a part of the index removed prints the promised warning, one line
    on stderr, and serves (docs/mcp.md promised it; nothing was printed)."""
    import io
    import shutil

    pytest.importorskip("mcp")
    import recallpack.adapters.mcp as mcp_adapter
    from recallpack.cli import main

    monkeypatch.setattr(mcp_adapter, "serve", lambda source, **kw: None)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    store = tmp_path / "idx"
    args = ["serve", "--docs", str(docs), "--index", str(store), "--window-tokens", "50", "--overlap-tokens", "10"]
    assert main(args) == 0
    shutil.rmtree(store / "bm25")
    capsys.readouterr()
    assert main(args) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("recallpack: warning:")]
    assert len(warnings) == 1 and "BM25 index" in warnings[0] and "rebuilding it" in warnings[0]
    (store / "manifest.json").unlink()
    assert main(args) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("recallpack: warning:")]
    assert len(warnings) == 1 and "manifest.json" in warnings[0]

"""The API reference shows every setting: the built pages list each field of the settings models
with its type, default and meaning, for the Packer and for each adapter component.

The site is built as ``make docs`` builds it (strict, offline), into a temporary folder, and the
tables are read from the HTML, so a setting added to ``PackerSettings`` cannot be left out of
the reference, nor shown with a stale default.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recallpack import Packer
from recallpack.adapters.shared.components import PackSettings
from recallpack.packing.packer import PackerSettings

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(
    r"<tr>\s*<td><code>(\w+)</code></td>\s*<td><code>(.*?)</code></td>\s*"
    r"<td><code>(.*?)</code></td>\s*<td>(.*?)</td>\s*</tr>",
    re.S,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built strictly into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out


def _plain(text: str) -> str:
    """Text as a reader sees it: no tags, no Markdown backticks, one space between words."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).replace("`", "").split())


def settings_table(page: str, anchor: str) -> list[tuple[str, str, str, str]]:
    """The rows of the settings table in the entry whose heading id is ``anchor``: the first
    table after that heading, which must come before the next entry's heading."""
    start = page.index(f'id="{anchor}"')
    table = page.index("<th>Setting</th>", start)
    following = re.search(r'<h\d id="[\w.]+"', page[start + 1:])
    assert following is None or start + 1 + following.start() > table, f"{anchor} has no settings table"
    body = page[table:page.index("</table>", table)]
    return [(n, _plain(t), _plain(d), _plain(m)) for n, t, d, m in ROW.findall(body)]


def _expected(model: Any) -> list[tuple[str, str, str]]:
    """Each field of a settings model: its name, its default as Python shows it, its docstring."""
    return [(name, repr(f.default), _plain(f.description or "")) for name, f in model.model_fields.items()]


def test_the_packer_page_lists_every_setting_with_its_default_and_meaning(site: Path) -> None:
    """The Packer's reference entry has a row for every field of PackerSettings and the Packer's
    own join, in order, with the default and the docstring the code has."""
    rows = settings_table((site / "reference" / "recallpack" / "index.html").read_text(), "recallpack.Packer")
    assert [(n, d, m) for n, _, d, m in rows] == _expected(Packer)
    assert set(PackerSettings.model_fields) < {n for n, *_ in rows}
    assert all(m for *_, m in rows) and all(t for _, t, *_ in rows)


def test_the_packer_page_shows_the_types_a_reader_can_use(site: Path) -> None:
    """Types are spelled out: Annotated unwrapped (a policy is named by a str, its meaning lists them)."""
    rows = settings_table((site / "reference" / "recallpack" / "index.html").read_text(), "recallpack.Packer")
    types = {n: t for n, t, *_ in rows}
    assert types["max_tokens"] == "int" and types["max_items"] == "int | None"
    assert types["policy"] == "str"  # a registered policy's name: the meaning lists them
    assert not [t for t in types.values() if "Annotated" in t or "BeforeValidator" in t]


def _components() -> dict[str, list[str]]:
    """Each reference page's adapter components that take the Packer's settings, by the module
    their entry is documented under: every public pydantic component (a PackSettings), and
    LlamaIndex's BudgetedRetriever, which takes them as keywords."""
    langchain = pytest.importorskip("recallpack.adapters.langchain")
    llamaindex = pytest.importorskip("recallpack.adapters.llamaindex")
    found: dict[str, list[str]] = {}
    for page, module in (("langchain", langchain), ("llamaindex", llamaindex)):
        found[page] = [
            name for name in module.__all__
            if isinstance(obj := getattr(module, name), type)
            and (issubclass(obj, PackSettings) or obj is llamaindex.BudgetedRetriever)
        ]
    return found


def test_every_adapter_component_lists_the_settings_it_takes(site: Path) -> None:
    """Each adapter component's entry lists every Packer setting but join, with the adapters'
    defaults (policy passages) and their lane settings."""
    components = _components()
    assert components == {
        "langchain": ["BudgetedRetriever", "BudgetCompressor", "EvidenceRenderer"],
        "llamaindex": ["BudgetPostprocessor", "BudgetedRetriever"],
    }
    for page, names in components.items():
        text = (site / "reference" / page / "index.html").read_text()
        for name in names:
            rows = settings_table(text, f"recallpack.adapters.{page}.{name}")
            assert [(n, d, m) for n, _, d, m in rows] == _expected(PackSettings), name
            assert "join" not in {n for n, *_ in rows}


def test_recall_points_at_the_packers_settings(site: Path) -> None:
    """recall(), pack() and recall_many() link to the Packer's entry, where the settings are."""
    text = (site / "reference" / "recallpack" / "index.html").read_text()
    for name in ("recall", "pack", "recall_many"):
        start = text.index(f'id="recallpack.{name}"')
        following = re.search(r'<h\d id="[\w.]+"', text[start + 1:])
        entry = text[start:start + 1 + following.start()] if following else text[start:]
        assert 'href="#recallpack.Packer"' in entry, name


def test_the_table_reader_sees_a_missing_setting() -> None:
    """The table reader is not vacuous: a row left out of a page is missing from what it reads."""
    page = (
        '<h2 id="recallpack.Packer">Packer</h2><table><thead><tr><th>Setting</th></tr></thead><tbody>'
        "<tr><td><code>max_tokens</code></td><td><code>int</code></td><td><code>2048</code></td>"
        "<td>The budget.</td></tr></tbody></table>"
    )
    rows = settings_table(page, "recallpack.Packer")
    assert rows == [("max_tokens", "int", "2048", "The budget.")]
    assert [(n, d) for n, _, d, _ in rows] != [(n, d) for n, d, _ in _expected(Packer)]


def test_the_packer_signature_names_every_setting_by_keyword(site: Path) -> None:
    """The Packer's signature on its page is its settings by keyword, not pydantic's ``**data``."""
    text = (site / "reference" / "recallpack" / "index.html").read_text()
    start = text.index('id="recallpack.Packer"')
    signature = _plain(text[start:text.index("Bases:", start)])
    assert "**data" not in signature and "max_tokens: int = 2048" in signature
    assert [n for n in Packer.model_fields if f"{n}:" not in signature] == []


# -- the layout, as a browser draws it ----------------------------------------------------------

#: Appended to a built page: once it is laid out, each Settings table's edges and the content
#: box's, and the cells whose content is wider than the cell, written into the DOM as JSON.
MEASURE = """<script>
window.addEventListener("load", () => {
  const tables = [...document.querySelectorAll(".settings-table table")].map((table) => {
    const box = table.closest("article").getBoundingClientRect();
    return {
      right: table.getBoundingClientRect().right, box_right: box.right, box_width: box.width,
      columns: [...table.querySelectorAll("th")].map((th) => [th.textContent.trim(), th.getBoundingClientRect().left]),
      spilling: [...table.querySelectorAll("td")].filter((td) => td.scrollWidth > td.clientWidth + 1)
        .map((td) => td.textContent.trim().slice(0, 40)),
    };
  });
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify(tables);
  document.body.append(out);
});
</script>"""


def browser() -> str:
    """Debian's headless Chromium (``apt-get install chromium``; .ci/run installs it), or a skip."""
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium); .ci/run installs it")
    return found


def measured(page: Path, width: int, profile: Path) -> list[dict[str, Any]]:
    """What MEASURE finds on ``page`` in a window ``width`` px wide (a fresh profile, nothing fetched)."""
    import json

    copy = page.with_name(f"measured-{width}.html")  # beside it, so its stylesheets load
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    done = subprocess.run(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         f"--window-size={width},900", "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.S)
    assert found is not None, done.stderr[-2000:]
    tables: list[dict[str, Any]] = json.loads(html.unescape(found.group(1)))
    return tables


@pytest.mark.parametrize("width", [1280, 820])
def test_every_settings_table_fits_the_page(site: Path, width: int, tmp_path: Path) -> None:
    """In headless Chromium, each Settings table (the Packer's and every adapter's) ends inside the
    content box, every column starts inside it, and no type or default spills out of its cell."""
    for page, count in (("recallpack", 1), ("langchain", 3), ("llamaindex", 2)):
        path = site / "reference" / page / "index.html"
        assert path.read_text().count('class="settings-table"') == count, page
        tables = measured(path, width, tmp_path / f"profile-{page}")
        assert len(tables) == count, page
        for table in tables:
            assert table["right"] <= table["box_right"] + 0.5, (page, table)
            assert all(left < table["box_right"] for _, left in table["columns"]), (page, table)
            assert table["spilling"] == [], (page, table)

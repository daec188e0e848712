"""A caller's ``template=``: its source or file read (bounded, never blocking), compiled once in
the bounded sandbox (:mod:`recallpack.packing.block.sandbox`) with the block's Markdown filters
(:mod:`recallpack.packing.block.markdown`), and rendered with the evidence as data.

Content is always data handed to a fixed template, never template source, and Jinja runs in
its sandbox, so ``{{ 7*7 }}`` inside a document stays ``{{ 7*7 }}``.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any, Union

import jinja2

from recallpack.packing.block import sandbox
from recallpack.packing.block.markdown import FILTERS
from recallpack.packing.errors import TemplateError

__all__ = ["TemplateSpec", "LoadedTemplate", "MAX_TEMPLATE_BYTES", "load_template", "render"]

TemplateSpec = Union[str, "PathLike[str]", None]

_ENV = sandbox.environment(dict(FILTERS))


@lru_cache(maxsize=32)
def _compile(source: str) -> jinja2.Template:
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template has a syntax error on line {exc.lineno}: {exc.message}") from exc


class LoadedTemplate:
    """A compiled template that pickles, cloudpickles and deep-copies as its source (a worker
    compiles it again; a Path template is not read again there, so it need not exist)."""

    __slots__ = ("source", "_compiled")

    def __init__(self, source: str) -> None:
        self.source = source
        self._compiled = _compile(source)

    def generate(self, **context: Any) -> Iterator[str]:
        return self._compiled.generate(**context)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LoadedTemplate, (self.source,))

    def __deepcopy__(self, memo: dict[int, Any]) -> LoadedTemplate:
        return self  # immutable

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LoadedTemplate) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)


#: A template file larger than this is refused: a template is a page of Jinja, not data.
MAX_TEMPLATE_BYTES = 1 << 20


def _read_template_file(path: Path) -> str:
    """The UTF-8 text of a regular file of at most MAX_TEMPLATE_BYTES, read without blocking: a
    FIFO would block the open until a writer came, a device like /dev/zero never ends."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TemplateError(f"template={str(path)!r}: no such file; pass an existing path") from None
    except OSError as exc:
        raise TemplateError(f"template={str(path)!r} cannot be opened: {exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TemplateError(
            f"template={str(path)!r} is not a regular file (a FIFO, a device or a directory); "
            "pass the path of a template file"
        )
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_TEMPLATE_BYTES + 1)
    if len(data) > MAX_TEMPLATE_BYTES:
        raise TemplateError(
            f"template={str(path)!r} is larger than {MAX_TEMPLATE_BYTES:,} bytes; a template is a page "
            "of Jinja, not data"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(f"template={str(path)!r} cannot be read as UTF-8 text: {exc}") from exc


def _deprecated_example_source() -> str:
    """What ``load_template(None)`` returned: the example's source, with a warning (this release)."""
    warnings.warn(
        "load_template(None) is deprecated: the default block is built in Python (Packer(template=None)), "
        "not by a template. To start a template of your own, read the example "
        'resources.files("recallpack.packing") / "templates" / "recall.md.j2" and pass it as template= '
        "(docs/custom-templates.md); None goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return (resources.files("recallpack.packing") / "templates" / "recall.md.j2").read_text("utf-8")


def load_template(template: TemplateSpec = None) -> LoadedTemplate:
    """Template source (any ``str``) or a template file (a ``Path``: a regular file of at most
    MAX_TEMPLATE_BYTES).

    A ``str`` is always source, never a path: a value read from configuration cannot make the
    packer open a file. ``None`` is deprecated (it loaded the example template, which is not
    what renders the default block: ``template=None`` in a Packer is the Python-built block).
    """
    if template is None:
        return LoadedTemplate(_deprecated_example_source())
    if isinstance(template, str):
        return LoadedTemplate(template)
    if not isinstance(template, PathLike):
        raise TemplateError(
            f"template={template!r} must be template source (a str), a pathlib.Path to a "
            f"template file, or None for the default; got {type(template).__name__}"
        )
    return LoadedTemplate(_read_template_file(Path(template)))


def render(
    template: LoadedTemplate,
    evidence: Sequence[Mapping[str, Any]],
    shared_scopes: Sequence[Mapping[str, Any]],
    *,
    max_chars: int | None = None,
) -> str:
    """The block, or ``""`` with no evidence; past ``max_chars`` of output, or a value inside the
    template past it (a string multiplied, a padded filter, a block joined), a TemplateError
    raised before that value exists."""
    if not evidence:
        return ""
    return sandbox.generate(
        lambda: template.generate(evidence=evidence, shared_scopes=shared_scopes), max_chars
    )



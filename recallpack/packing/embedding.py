"""The old path of :mod:`recallpack.packing.choosing.embedding`.

Every name still works for one release, with a DeprecationWarning
(recallpack.packing._compat.MOVED_MODULES); type checkers see the names where they live now."""

from typing import TYPE_CHECKING

from recallpack.packing._compat import moved_module

if TYPE_CHECKING:
    from recallpack.packing.choosing.embedding import *  # noqa: F403

__getattr__ = moved_module(__name__)

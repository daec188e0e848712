"""Deprecated: this module became the package :mod:`recallpack.packing.tokenizers`.

Its public names still import from here for one release, each with a DeprecationWarning naming
its new place; the protocols of the hosts' tokenizers moved to :mod:`recallpack.adapters.shared.tokenizers`
(the whole list: :mod:`recallpack.packing._compat`).
"""

from __future__ import annotations

from recallpack.packing._compat import moved_names

__getattr__ = moved_names(__name__)

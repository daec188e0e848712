"""The old home of :func:`recallpack.budget_for`, which reads host model objects and so lives
with the adapters now (:mod:`recallpack.adapters.shared.sizing`); its names still work from here for
one release, with a DeprecationWarning that names the new home (:mod:`recallpack.packing._compat`)."""

from __future__ import annotations

from recallpack.packing._compat import moved_names

__getattr__ = moved_names(__name__)

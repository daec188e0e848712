"""A host's reader that needs its framework, which is not installed (tests/test_hosts.py)."""

import ghost_framework  # type: ignore[import-not-found]  # noqa: F401

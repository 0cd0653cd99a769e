"""Property-based fuzz tests (hypothesis); profiles in ``conftest.py``."""

"""Kubernetes mode against the fake API server; shared fixtures in ``conftest.py``."""

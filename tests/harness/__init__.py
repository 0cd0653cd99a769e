"""Test harness for Seshat: real PostgreSQL, MariaDB, OCI registries, Git remotes, SSH keys.

Why real services: Seshat's job is to drive real databases, registries and Git
remotes, so mocks would only test our assumptions about them.  Each module here
starts one kind of service on loopback, on ports picked at run time, and stops
exactly what it started (by PID), also when a test fails.  The pytest fixtures
that wrap these modules live in ``tests/conftest.py``.
"""

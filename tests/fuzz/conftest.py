"""Hypothesis profiles for the fuzz tests.

* ``ci`` (the default): each test's own bounded number of examples (``fuzzkit.budget``),
  derandomized so every CI run tries the same inputs, no example database (nothing is
  written to the work tree), and a 2 s deadline per example: a slower one is a hang.
* ``long`` (``SESHAT_FUZZ=long``): 20,000 examples per test, random, no deadline, for
  runs of minutes or hours; ``--hypothesis-show-statistics`` reports what was tried.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, settings

from fuzz.fuzzkit import LONG

settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=timedelta(seconds=2),
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=20_000,
    derandomize=False,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("long" if LONG else "ci")

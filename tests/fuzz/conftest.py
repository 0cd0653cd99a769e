"""Hypothesis profiles for the fuzz tests.

* ``ci`` (the default): each test's own bounded number of examples (``fuzzkit.budget``),
  derandomized so every CI run tries the same inputs, no example database, and a 2 s
  deadline per example: a slower one is a hang.
* ``long`` (``SESHAT_FUZZ=long``): 20,000 examples per test (``SESHAT_FUZZ_EXAMPLES``
  sets another number, for a run of the slow tests that fits the time there is), random,
  no deadline; ``--hypothesis-show-statistics`` reports what was tried.
"""

from __future__ import annotations

import os
import tempfile
from datetime import timedelta

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

from fuzz.fuzzkit import LONG

# Hypothesis caches what it learns from the source (constants, Unicode tables) in a
# .hypothesis folder beside the tests; that goes to a temporary folder instead, so a test
# run writes nothing to the work tree.
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), f"seshat-hypothesis-{os.getuid()}"))

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
    max_examples=int(os.environ.get("SESHAT_FUZZ_EXAMPLES", "20000")),
    derandomize=False,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("long" if LONG else "ci")

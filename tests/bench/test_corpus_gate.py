"""The sqldef corpus gates: no case may fail unless the dialect's known-failures list names it.

Runs ``bench/corpus.py`` over each dialect's corpus exactly as CI and developers run it by
hand (it starts its own private server with the test harness), then fails on any regression:
a case that fails but is not listed in ``bench/corpus-known-failures/<dialect>.txt``. Listed
cases that now pass are printed (run pytest with ``-rP`` or ``-s`` to see them) so the list
can be shrunk.

Which cases: a fixed share of PostgreSQL's (every 4th runnable case, ``SESHAT_CORPUS_SHARD``)
and of MySQL's (every 3rd, ``SESHAT_CORPUS_MYSQL_SHARD``), all 65 SQLite cases; ``all`` scores
a whole corpus. A dialect's share is scored as a few test items (``PARTS``), each every
``PARTS``-th case of the share, so that the suite's workers can score them side by side and
none of them waits for one long gate at the end. The parts together are exactly the share.

Deselect them with ``-m "not corpus"`` when iterating on something unrelated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCORER = ROOT / "bench" / "corpus.py"
KNOWN = ROOT / "bench" / "corpus-known-failures"
CORPUS = Path(os.environ.get("SESHAT_CORPUS", str(ROOT.parent / "shared" / "corpus" / "sqldef")))
TIMEOUT = int(os.environ.get("SESHAT_CORPUS_TIMEOUT", "3600"))
# The whole PostgreSQL corpus takes about half an hour on two cores and MySQL's about ten
# minutes, too long for every CI run.
SHARDS = {
    "postgresql": os.environ.get("SESHAT_CORPUS_SHARD", "1/4"),
    "mysql": os.environ.get("SESHAT_CORPUS_MYSQL_SHARD", "1/3"),
    "sqlite": "all",
}
PARTS = {"postgresql": 4, "mysql": 2, "sqlite": 1}


def parts(share: str, count: int) -> list[str]:
    """``share`` (``I/N`` or ``all``) as ``count`` shards whose union is exactly ``share``.

    ``bench/corpus.py --shard I/N`` scores runnable cases I-1, I-1+N, I-1+2N, ...; those are
    the cases ``I + k*N`` of ``count*N`` for k in 0..count-1, each every ``count*N``-th."""
    index, total = (1, 1) if share == "all" else map(int, share.split("/"))
    return [f"{index + k * total}/{count * total}" for k in range(count)]


def test_the_parts_of_a_share_are_exactly_that_share() -> None:
    runnable = list(range(1000))

    def picked(shard: str) -> list[int]:
        index, total = map(int, shard.split("/"))
        return runnable[index - 1 :: total]

    for share, count in (("1/4", 4), ("1/3", 2), ("all", 1), ("all", 4), ("2/5", 3)):
        together = sorted(n for part in parts(share, count) for n in picked(part))
        whole = runnable if share == "all" else picked(share)
        assert together == whole, (share, count)


def _gate_items() -> list[tuple[str, str]]:
    return [(name, part) for name, share in SHARDS.items() for part in parts(share, PARTS[name])]


@pytest.mark.corpus
@pytest.mark.parametrize(("dialect", "shard"), _gate_items())
def test_corpus_has_no_regressions(dialect: str, shard: str, tmp_path: Path) -> None:
    if not (CORPUS / dialect).is_dir():
        pytest.skip(f"the sqldef corpus is not at {CORPUS} (set SESHAT_CORPUS)")
    results = tmp_path / "results.json"
    command = [sys.executable, str(SCORER), "--dialect", dialect, "--corpus", str(CORPUS)]
    command += ["--check-known", str(KNOWN / f"{dialect}.txt"), "--json", str(results)]
    command += ["--shard", shard]
    completed = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    print(completed.stdout)
    assert completed.returncode == 0, (
        f"bench/corpus.py exited {completed.returncode}\n"
        f"{completed.stdout[-15000:]}\n--- stderr ---\n{completed.stderr[-5000:]}"
    )
    document = json.loads(results.read_text(encoding="utf-8"))
    scored = sum(case["status"] != "skip" for case in document["cases"])
    assert scored > 0, "no case was run"
    if dialect == "sqlite":
        assert scored == 65

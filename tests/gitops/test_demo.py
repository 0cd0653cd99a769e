"""``seshat demo`` runs the whole loop from a clone, offline, as the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_seshat_demo_runs_the_loop(tmp_path: Path) -> None:
    seshat = Path(sys.executable).parent / "seshat"
    done = subprocess.run(
        [str(seshat), "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    order = [
        "shop/catalogue is AwaitingApproval",
        "shop/catalogue is InSync",
        "shop/catalogue is Blocked (DestructiveChangesDisallowed)",
        "shop/catalogue is AwaitingApproval",
        "shop/catalogue is InSync",
    ]
    position = 0
    for expected in order:
        position = out.index(expected, position) + len(expected)
    assert 'ALTER TABLE "products" DROP COLUMN "legacy_code";' in out
    assert "tables now: orders_archive, products" in out
    ledger = [
        "shop/ledger is AwaitingApproval",
        "apply 1_accounts.sql, 2_entries.sql",
        "shop/ledger is InSync",
        "shop/ledger is Blocked (ChecksumModified)",
        "shop/ledger is AwaitingApproval",
        "apply 3_entries_index.sql",
        "shop/ledger is InSync",
    ]
    position = 0
    for expected in ledger:
        position = out.index(expected, position) + len(expected)
    assert "ledger tables now: accounts, entries, seshat_schema_migrations" in out
    log = out[out.index("the status branch's history") :]
    assert log.count("shop/catalogue: AwaitingApproval -> Applying") == 2
    assert log.count("shop/ledger: AwaitingApproval -> Applying") == 2
    repository = Path(out.split("  repository ", 1)[1].split(",", 1)[0])
    assert repository.name == "repo" and not repository.parent.exists()  # cleaned up

"""``seshat demo`` runs the whole loop from a clone, offline, as the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _demo(tmp_path: Path, *options: str) -> str:
    """``seshat demo`` (with ``options``) run from ``tmp_path``; what it printed."""
    seshat = Path(sys.executable).parent / "seshat"
    done = subprocess.run(
        [str(seshat), "demo", *options],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _in_order(out: str, expected: list[str]) -> None:
    """Each of ``expected`` is in ``out``, after the one before it."""
    position = 0
    for text in expected:
        position = out.index(text, position) + len(text)


def test_seshat_demo_runs_the_loop(tmp_path: Path) -> None:
    out = _demo(tmp_path)
    order = [
        "shop/catalogue is AwaitingApproval",
        "shop/catalogue is InSync",
        "shop/catalogue is Blocked (DestructiveChangesDisallowed)",
        "shop/catalogue is AwaitingApproval",
        "shop/catalogue is InSync",
    ]
    _in_order(out, order)
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
    _in_order(out, ledger)
    assert "ledger tables now: accounts, entries, seshat_schema_migrations" in out
    log = out[out.index("the status branch's history") :]
    assert log.count("shop/catalogue: AwaitingApproval -> Applying") == 2
    assert log.count("shop/ledger: AwaitingApproval -> Applying") == 2
    repository = Path(out.split("  repository ", 1)[1].split(",", 1)[0])
    assert repository.name == "repo" and not repository.parent.exists()  # cleaned up


def test_seshat_demo_fleet_rolls_three_tenants_out_in_two_waves_with_one_approval(
    tmp_path: Path,
) -> None:
    out = _demo(tmp_path, "--fleet")
    order = [
        "shop/tenants/acme is AwaitingApproval",
        "shop/tenants/initech is AwaitingApproval",
        "one distinct plan for 3 members (acme, globex, initech)",
        "seshat approve shop/tenants --plan sha256:",
        "shop/tenants/acme is InSync",
        "shop/tenants/globex is Pending (RolloutWaiting)",
        "fleet shop/tenants: Paused: ",
        "commit spec.rollout.resume: step1-",
        "shop/tenants/globex is InSync",
        "shop/tenants/initech is InSync",
        "fleet shop/tenants: InSync",
    ]
    _in_order(out, order)
    assert out.count("alice: seshat approve") == 1  # one approval for the three
    for tenant in ("acme", "globex", "initech"):
        assert f"tables of {tenant}: accounts" in out

"""Quiet status and one commit per pass (issue 16, item 4), end to end on real components.

A status file changes only when something a person would care about changes; the
declarations' commit a pass read is the commit's ``Seshat-Source-Revision`` trailer, never in
the file. Everything a pass decided is one commit listing each change, except the dispatch
marker an Apply needs, which is pushed before the runner starts and carries the verdicts
staged before it. No commit when nothing changed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pytest
from harness.executors import HookedExecutor
from harness.reconcile_world import World, migration_yaml, schema_yaml, tables

from gitops.execution.executor import EnvValue
from gitops.reconcile.passes import run_pass
from gitops.writeback.batch import Batch, Change, change_lines
from gitops.writeback.commits import parse_trailers
from gitops.writeback.ledger import RECORD_TRAILER
from runner.protocol.messages import OperationInput

STATUS = "seshat/status"
ORDERS = "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER);\n"
ITEMS = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"


def _main(world: World) -> str:
    return world.git("rev-parse", "refs/heads/main").strip()


def _files(world: World, *names: str) -> dict[str, bytes]:
    return {n: world.show(STATUS, f"status/shop/{n}.yaml").encode() for n in names}


def test_a_pass_over_an_unrelated_commit_makes_no_status_commit(world: World) -> None:
    world.database("orders")
    world.database("items")
    world.remote.write_file(
        "databases/orders.yaml", schema_yaml("orders", world.artifact("o", ORDERS))
    )
    world.remote.write_file(
        "databases/items.yaml", schema_yaml("items", world.artifact("i", ITEMS), apply="Always")
    )
    world.remote.commit_all("declare orders and items")
    first = _main(world)
    verdicts = {"shop/orders": "AwaitingApproval/AwaitingApproval", "shop/items": "InSync/InSync"}
    assert world.reconcile() == verdicts
    log, files = world.status_log(), _files(world, "orders", "items")
    # The revision the pass read is the trailer of the commit that recorded it, never a file.
    assert parse_trailers(world.status_messages()[0]).source_revision == first
    for data in files.values():
        assert first.encode() not in data and b"observedRevision" not in data

    # Commits that touch nothing Seshat reads, then the same pass again: no status commit.
    world.remote.write_file("README.md", "# the shop\n")
    world.remote.commit_all("document the shop")
    world.remote.write_file("docs/notes.md", "notes\n")
    world.remote.commit_all("notes")
    assert _main(world) != first
    for _ in range(2):
        assert world.reconcile() == verdicts
        assert world.status_log() == log
        assert _files(world, "orders", "items") == files


def test_a_resource_s_file_is_the_same_bytes_at_another_revision(world: World) -> None:
    """Another resource changes (a commit is made, at a new source revision): the file of the
    resource whose verdict did not change keeps its bytes, conditions and all, and the
    commit names only the resource that changed."""
    world.database("orders")
    world.database("items")
    orders = schema_yaml("orders", world.artifact("o", ORDERS))
    world.remote.write_file("databases/orders.yaml", orders)
    world.remote.write_file(
        "databases/items.yaml", schema_yaml("items", world.artifact("i", ITEMS))
    )
    world.remote.commit_all("declare")
    world.reconcile()
    before = _files(world, "orders")
    world.remote.write_file(
        "databases/items.yaml",
        schema_yaml("items", world.artifact("i2", ITEMS), apply="Never"),
    )
    world.remote.commit_all("items: apply Never")
    second = _main(world)
    assert world.reconcile() == {
        "shop/orders": "AwaitingApproval/AwaitingApproval",
        "shop/items": "Blocked/ApplyDisabled",
    }
    assert _files(world, "orders") == before
    latest = world.status_messages()[0]
    trailers = parse_trailers(latest)
    assert [r.resource for r in trailers.resources] == ["DatabaseSchema shop/items"]
    assert trailers.source_revision == second
    assert change_lines(latest) == ["shop/items: AwaitingApproval -> Blocked (ApplyDisabled)"]


def test_a_pass_that_changes_two_resources_makes_one_commit_listing_both(world: World) -> None:
    world.database("orders")
    world.database("items")
    orders, items = world.artifact("o", ORDERS), world.artifact("i", ITEMS)
    world.remote.write_file("databases/items.yaml", schema_yaml("items", items))
    world.remote.write_file("databases/orders.yaml", schema_yaml("orders", orders))
    world.remote.commit_all("declare")
    world.reconcile()  # two workers: the lines below are sorted, whichever finished first
    assert world.status_log() == ["seshat: 2 resources changed"]  # two first statuses

    world.remote.write_file("databases/items.yaml", schema_yaml("items", items, apply="Never"))
    world.remote.write_file("databases/orders.yaml", schema_yaml("orders", orders, apply="Never"))
    world.remote.commit_all("apply: Never for both")
    assert world.reconcile() == {
        "shop/items": "Blocked/ApplyDisabled",
        "shop/orders": "Blocked/ApplyDisabled",
    }
    assert len(world.status_log()) == 2  # one more commit for both
    latest = world.status_messages()[0]
    assert latest.splitlines()[0] == "seshat: 2 resources changed"
    assert change_lines(latest) == [
        "shop/items: AwaitingApproval -> Blocked (ApplyDisabled)",
        "shop/orders: AwaitingApproval -> Blocked (ApplyDisabled)",
    ]
    trailers = parse_trailers(latest)
    assert [(r.resource, r.phase) for r in trailers.resources] == [
        ("DatabaseSchema shop/items", "Blocked"),
        ("DatabaseSchema shop/orders", "Blocked"),
    ]
    assert all(r.plan and r.plan.startswith("sha256:") for r in trailers.resources)
    assert trailers.source_revision == _main(world)


class InReverse(HookedExecutor):
    """The real runner, but a resource's runner starts only once the resource after it (in
    ``order``) has staged its verdict: four workers that finish in the reverse order of the
    declarations, every time, without relying on timing."""

    def __init__(self, work_dir: Path, order: Sequence[str]) -> None:
        super().__init__(work_dir)
        self.after_me = {f"{n.upper()}_URL": later for n, later in pairwise(order)}
        self.staged = {name: threading.Event() for name in order}

    def before(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        for variable in environment:
            if variable in self.after_me:
                assert self.staged[self.after_me[variable]].wait(60), "no verdict came"


def test_one_pass_writes_the_same_commit_with_one_worker_and_with_four(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four resources in four realms (three schemas, one migration directory), four verdicts,
    one status commit: with one worker they are staged in the declarations' order, with four
    in the reverse order (each runner waits for the next resource's verdict), and the two
    commits are the same bytes, so the same commit id (same clock, same Git dates)."""
    order = ["alpha", "beta", "gamma", "ledger"]
    world.database("alpha")
    world.database("beta", "CREATE TABLE legacy (id INTEGER PRIMARY KEY);\n")
    world.database("gamma", ORDERS)
    world.database("ledger")
    orders, items = world.artifact("o", ORDERS), world.artifact("i", ITEMS)
    world.remote.write_file("databases/alpha.yaml", schema_yaml("alpha", items))
    world.remote.write_file("databases/beta.yaml", schema_yaml("beta", items))
    world.remote.write_file("databases/gamma.yaml", schema_yaml("gamma", orders))
    files = {"1_ledger.sql": "CREATE TABLE ledger (id INTEGER PRIMARY KEY);\n"}
    world.remote.write_file(
        "databases/ledger.yaml", migration_yaml("ledger", world.migrations("m", files))
    )
    world.remote.commit_all("declare")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")

    staged: list[str] = []
    executor: InReverse | None = None
    stage = Batch.stage

    def recording(batch: Batch, change: Change) -> None:
        stage(batch, change)
        staged.append(change.key.partition("/")[2])
        if executor is not None:
            executor.staged[staged[-1]].set()

    monkeypatch.setattr(Batch, "stage", recording)

    def one_pass(workers: int) -> bytes:
        staged.clear()
        work = world.tmp / f"controller-{workers}"  # a controller of its own each time
        report = run_pass(
            world.remote.remote_url,
            work,
            workers=workers,
            executor=executor,
            clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        )
        assert report.phases == {
            "shop/alpha": "AwaitingApproval",
            "shop/beta": "Blocked",
            "shop/gamma": "InSync",
            "shop/ledger": "AwaitingApproval",
        }, report.reasons
        [commit] = world.git("rev-list", "refs/heads/seshat/status").split()
        raw = world.git("cat-file", "commit", commit).encode()
        world.git("update-ref", "-d", "refs/heads/seshat/status")  # as if never run
        return raw

    one = one_pass(1)
    assert staged == order
    executor = InReverse(world.tmp / "operations", order)
    four = one_pass(4)
    assert staged == order[::-1]  # the workers finished in the other order
    assert four == one
    assert change_lines(one.decode().partition("\n\n")[2]) == [
        "shop/alpha: AwaitingApproval",
        "shop/beta: Blocked (DestructiveChangesDisallowed)",
        "shop/gamma: InSync",
        "shop/ledger: AwaitingApproval",
    ]


class WatchingExecutor(HookedExecutor):
    """The real runner; when an Apply is about to start, what the remote's status branch
    holds is noted."""

    def __init__(self, world: World) -> None:
        super().__init__(world.work / "operations")
        self.world = world
        self.at_apply: list[list[str]] = []

    def before(
        self, requests: Sequence[OperationInput], environment: Mapping[str, EnvValue]
    ) -> None:
        if any(r.operation == "apply" for r in requests):
            self.at_apply.append(self.world.status_messages())


def test_the_dispatch_marker_carries_the_verdicts_before_it(world: World) -> None:
    """``alpha`` is reconciled before ``orders`` (one worker reads the declarations in path
    order): its verdict rides the dispatch marker of ``orders``, pushed before the Apply
    starts, and the pass ends with one more commit, ``orders``'s own verdict."""
    world.database("alpha")
    database = world.database("orders")
    world.remote.write_file("databases/a.yaml", schema_yaml("alpha", world.artifact("a", ITEMS)))
    world.remote.write_file(
        "databases/b.yaml", schema_yaml("orders", world.artifact("o", ORDERS), apply="Always")
    )
    world.remote.commit_all("declare")
    executor = WatchingExecutor(world)
    report = run_pass(world.remote.remote_url, world.work, executor=executor, workers=1)
    assert report.phases == {"shop/alpha": "AwaitingApproval", "shop/orders": "InSync"}
    assert tables(database) == ["orders"]

    [seen] = executor.at_apply  # when the runner started, the marker was on the remote
    [marker] = seen
    assert change_lines(marker) == ["shop/alpha: AwaitingApproval", "shop/orders: Applying"]
    assert [(r.resource, r.phase) for r in parse_trailers(marker).resources] == [
        ("DatabaseSchema shop/alpha", "AwaitingApproval"),
        ("DatabaseSchema shop/orders", "Applying"),
    ]
    assert f'{RECORD_TRAILER}: {{"approval"' not in marker  # apply: Always consumes none
    assert '"type":"dispatched"' in marker

    messages = world.status_messages()
    assert messages[1:] == [marker] and len(messages) == 2
    final = messages[0]
    assert change_lines(final) == ["shop/orders: Applying -> InSync"]
    assert [r.resource for r in parse_trailers(final).resources] == ["DatabaseSchema shop/orders"]
    assert '"outcome":"Applied"' in final and '"type":"finished"' in final
    assert world.status("alpha")["status"]["phase"] == "AwaitingApproval"  # type: ignore[index]

    # The next pass decides the same: nothing is committed.
    assert world.reconcile() == {
        "shop/alpha": "AwaitingApproval/AwaitingApproval",
        "shop/orders": "InSync/InSync",
    }
    assert len(world.status_messages()) == 2


def test_nothing_runs_and_nothing_is_lost_while_the_status_branch_takes_no_push(
    world: World,
) -> None:
    """The remote refuses every push to the status branch: the dispatch marker (with the
    verdict staged before it) cannot be pushed, so the Apply does not run, and the pass's
    own commit fails too; the pass still ends, and the first pass that can push records
    every verdict."""
    world.database("alpha")
    database = world.database("orders")
    world.remote.write_file("databases/a.yaml", schema_yaml("alpha", world.artifact("a", ITEMS)))
    world.remote.write_file(
        "databases/b.yaml", schema_yaml("orders", world.artifact("o", ORDERS), apply="Always")
    )
    world.remote.commit_all("declare")
    hook = world.remote.remote_path / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do\n"
        '  [ "$ref" = refs/heads/seshat/status ] && { echo closed >&2; exit 1; }\n'
        "done\nexit 0\n"
    )
    hook.chmod(0o755)
    said: list[str] = []
    report = run_pass(world.remote.remote_url, world.work, log=said.append, workers=1)
    assert report.phases == {"shop/alpha": "AwaitingApproval", "shop/orders": "Failed"}
    assert report.reasons["shop/orders"] == "DispatchFailed"
    assert tables(database) == []  # no marker, no Apply
    assert world.status_log() == []
    assert any("shop/alpha, shop/orders were not recorded" in line for line in said), said

    hook.unlink()
    assert world.reconcile(workers=1) == {
        "shop/alpha": "AwaitingApproval/AwaitingApproval",
        "shop/orders": "InSync/InSync",
    }
    assert tables(database) == ["orders"]
    assert [change_lines(m) for m in world.status_messages()] == [
        ["shop/orders: Applying -> InSync"],
        ["shop/alpha: AwaitingApproval", "shop/orders: Applying"],
    ]

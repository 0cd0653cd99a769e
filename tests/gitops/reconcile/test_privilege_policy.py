"""``spec.policy.managedRoles`` / ``manageOwnership``: from the resource to the runner's plan."""

from __future__ import annotations

from harness.executors import RecordingExecutor
from harness.postgres import PostgresDatabase
from harness.reconcile_world import World, schema_yaml
from psycopg import sql

from gitops.reconcile.passes import run_pass
from runner.protocol.messages import PlanSettings

READER = "policy_reader"
SCHEMA = "CREATE TABLE accounts (id bigint PRIMARY KEY);\n"


def test_managed_roles_reach_the_runner_and_their_grants_need_an_approval(
    world: World, postgres_database: PostgresDatabase
) -> None:
    with postgres_database.server.connect() as admin:
        admin.execute(
            sql.SQL(
                "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) "
                "THEN CREATE ROLE {} NOLOGIN; END IF; END$$"
            ).format(sql.Literal(READER), sql.Identifier(READER))
        )
    with postgres_database.connect_as_app() as conn:
        conn.execute(SCHEMA.encode())
    world.monkeypatch.setenv("ORDERS_URL", postgres_database.url_with_password)
    layout = world.artifact("grants", SCHEMA + f"GRANT SELECT ON accounts TO {READER};\n")

    def reconcile(extra: str) -> tuple[str, list[PlanSettings]]:
        world.remote.write_file(
            "databases/pg.yaml",
            schema_yaml("orders", layout, apply="Always", engine="postgresql", extra=extra),
        )
        world.remote.commit_all(f"policy{extra}")
        executor = RecordingExecutor(world.work)
        report = run_pass(world.remote.remote_url, world.work, executor=executor)
        return f"{report.phases['shop/orders']}/{report.reasons['shop/orders']}", executor.plans

    # Without managed roles the GRANT is not the plan's business: nothing to do.
    verdict, plans = reconcile("")
    assert verdict == "InSync/InSync"
    assert plans and all(p.managed_roles is None and p.manage_ownership is None for p in plans)
    # With it, the plan grants; a privilege change waits for an approval even under Always.
    verdict, plans = reconcile(f", managedRoles: [{READER}], manageOwnership: true")
    assert verdict == "AwaitingApproval/AwaitingApproval"
    assert plans and all(p.managed_roles == [READER] and p.manage_ownership for p in plans)
    with postgres_database.connect_as_app() as conn:
        granted = conn.execute(
            "SELECT count(*) FROM information_schema.role_table_grants"
            f" WHERE grantee = '{READER}' AND table_name = 'accounts'"
        ).fetchone()
    assert granted == (0,)  # planned, not applied


def test_a_managed_role_holding_a_double_quote_is_planned_approved_and_applied(
    world: World, postgres_database: PostgresDatabase
) -> None:
    """A role name is any text PostgreSQL accepts: ``policy"quoted`` travels from the
    declaration to the plan quoted (``"policy""quoted"``), never refused, and the approved
    plan grants to exactly that role."""
    role = 'policy"quoted'
    with postgres_database.server.connect() as admin:
        admin.execute(
            sql.SQL(
                "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) "
                "THEN CREATE ROLE {} NOLOGIN; END IF; END$$"
            ).format(sql.Literal(role), sql.Identifier(role))
        )
    world.monkeypatch.setenv("ORDERS_URL", postgres_database.url_with_password)
    layout = world.artifact("quoted", SCHEMA + 'GRANT SELECT ON accounts TO "policy""quoted";\n')
    world.remote.write_file(
        "databases/pg.yaml",
        schema_yaml(
            "orders", layout, engine="postgresql", extra=", managedRoles: ['policy\"quoted']"
        ),
    )
    world.remote.commit_all("grant to a quoted role")
    executor = RecordingExecutor(world.work)
    report = run_pass(world.remote.remote_url, world.work, executor=executor)
    assert report.phases == {"shop/orders": "AwaitingApproval"}, report.reasons
    assert executor.plans and all(p.managed_roles == [role] for p in executor.plans)
    status = world.status("orders")["status"]
    plan_id = str(status["plan"]["id"])  # type: ignore[index]
    plan_sql = world.show(
        "seshat/status", f"plans/shop/orders/{plan_id.removeprefix('sha256:')}.sql"
    )
    assert 'GRANT SELECT ON TABLE "public"."accounts" TO "policy""quoted";' in plan_sql

    world.approve("orders", plan_id)
    report = run_pass(world.remote.remote_url, world.work, executor=RecordingExecutor(world.work))
    assert report.phases == {"shop/orders": "InSync"}, report.reasons
    with postgres_database.connect_as_app() as conn:
        granted = conn.execute(
            "SELECT grantee, privilege_type FROM information_schema.role_table_grants"
            " WHERE table_name = 'accounts' AND grantee = %s",
            (role,),
        ).fetchall()
    assert granted == [(role, "SELECT")]

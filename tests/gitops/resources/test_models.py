"""The resource models: defaults, bounds, enums and the URL-by-reference rule."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gitops.repo.messages import field_errors, format_field
from gitops.resources import DatabaseMigration, DatabaseSchema
from gitops.resources.config import Config
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy


def schema(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target": {"engine": "postgresql", "url": {"fromEnv": "DB_URL"}, "coordinationKey": "db"},
        "artifact": {"ref": "oci://localhost:5000/a/b:v1", "verification": {"policy": "p"}},
    }
    return {"metadata": {"name": "orders", "namespace": "shop"}, "spec": {**base, **spec}}


def errors(model: Any, data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return [f"{format_field(f)}: {m}" for f, m in field_errors(caught.value)]


def test_defaults_are_applied_and_rendered_in_their_wire_spelling() -> None:
    resource = DatabaseSchema.model_validate(schema())
    spec = resource.model_dump(mode="json", by_alias=True)["spec"]
    assert spec["interval"] == "10m"
    assert spec["retryInterval"] == "30s"
    assert spec["suspend"] is False
    assert spec["policy"] == {
        "apply": "OnApproval",
        "allowDestructive": False,
        "protectedTables": [],
        "exclude": [],
        "schemas": [],
        "excludeSchemas": [],
        "lockTimeout": "30s",
        "transactionMode": "auto",
        "managedRoles": [],
        "manageOwnership": False,
        "proceduralSchema": False,
        "drops": "Plan",
        "impact": "estimate",
        "timeouts": {"plan": "10m", "apply": "6h", "migrate": "6h"},
    }
    assert resource.metadata.namespace == "shop"
    migration = DatabaseMigration.model_validate(schema())
    assert migration.spec.policy.lock_timeout == 300
    assert migration.spec.policy.out_of_order is False
    assert migration.spec.policy.timeouts.migrate == 6 * 3600


def test_the_sandbox_settings_default_to_declarations_in_a_jail() -> None:
    from gitops.reconcile.schema import schema_policy_digest

    plain = DatabaseSchema.model_validate(schema())
    assert plain.spec.policy.procedural_schema is False and plain.spec.dev is None
    unjailed = DatabaseSchema.model_validate(schema(dev={"isolation": "none"}))
    assert unjailed.spec.dev is not None and unjailed.spec.dev.url is None
    assert unjailed.spec.dev.isolation == "none"
    with pytest.raises(ValidationError, match="isolation"):
        DatabaseSchema.model_validate(schema(dev={"isolation": "chroot"}))
    # Unset, the opt-in is left out of the policy digest: existing plan ids stand.
    opted = DatabaseSchema.model_validate(schema(policy={"proceduralSchema": True}))
    assert schema_policy_digest(opted) != schema_policy_digest(plain)
    assert schema_policy_digest(plain) == schema_policy_digest(
        DatabaseSchema.model_validate(schema(policy={"proceduralSchema": False}))
    )


def test_drops_default_to_plan_and_skip_changes_the_policy_digest() -> None:
    from gitops.reconcile.schema import schema_policy_digest

    plain = DatabaseSchema.model_validate(schema())
    assert plain.spec.policy.drops == "Plan"
    skipping = DatabaseSchema.model_validate(schema(policy={"drops": "Skip"}))
    assert skipping.spec.policy.drops == "Skip"
    # Skip binds the plan id; Plan, written or not, digests as before the field existed.
    assert schema_policy_digest(skipping) != schema_policy_digest(plain)
    assert schema_policy_digest(plain) == schema_policy_digest(
        DatabaseSchema.model_validate(schema(policy={"drops": "Plan"}))
    )
    assert errors(DatabaseSchema, schema(policy={"drops": "Keep"})) == [
        "spec.policy.drops: 'Keep' is not one of Plan, Skip"
    ]


def test_timeouts_are_bounded_and_stay_out_of_the_policy_digest() -> None:
    from gitops.reconcile.migration import migration_policy_digest
    from gitops.reconcile.schema import schema_policy_digest

    longer = {"policy": {"timeouts": {"apply": "12h", "plan": "30m"}}}
    resource = DatabaseSchema.model_validate(schema(**longer))
    assert (resource.spec.policy.timeouts.apply, resource.spec.policy.timeouts.plan) == (
        43200,
        1800,
    )
    # Changing how long an operation may take keeps the plan id, so approvals stand...
    plain = DatabaseSchema.model_validate(schema())
    assert schema_policy_digest(resource) == schema_policy_digest(plain)
    migration = DatabaseMigration.model_validate(schema(**longer))
    assert migration_policy_digest(migration) == migration_policy_digest(
        DatabaseMigration.model_validate(schema())
    )
    # ...while the transaction mode decides how the plan runs, and changes it.
    atomic = DatabaseMigration.model_validate(schema(policy={"transactionMode": "all"}))
    assert migration_policy_digest(atomic) != migration_policy_digest(migration)
    assert errors(DatabaseSchema, schema(policy={"timeouts": {"apply": "5s"}})) == [
        "spec.policy.timeouts.apply: must be between 30s and 7d"
    ]


@pytest.mark.parametrize(
    ("interval", "seconds"), [("10s", 10), ("90s", 90), ("1h30m", 5400), ("24h", 86400)]
)
def test_interval_accepts_durations_within_bounds(interval: str, seconds: int) -> None:
    assert DatabaseSchema.model_validate(schema(interval=interval)).spec.interval == seconds


@pytest.mark.parametrize("interval", ["9s", "25h", "2d", "ten minutes", "", "1.5h"])
def test_interval_outside_10s_to_24h_is_refused(interval: str) -> None:
    assert errors(DatabaseSchema, schema(interval=interval))[0].startswith("spec.interval: must")


@pytest.mark.parametrize(
    "duration",
    [
        "１０m",  # full-width digits: int() and \\d read them as 10
        "٣٠s",  # Arabic-Indic
        "1\u0661m",  # one ASCII digit, one not
        "१०m",  # Devanagari
        "10m\u3000",  # an ideographic space after it
        "10ｍ",  # a full-width unit
    ],
)
def test_a_duration_with_a_digit_or_a_letter_that_is_not_ascii_is_refused(duration: str) -> None:
    message = "must be a duration such as 30s, 10m or 1h30m"
    assert errors(DatabaseSchema, schema(interval=duration)) == [f"spec.interval: {message}"]
    timeouts = {"policy": {"timeouts": {"apply": duration}}}
    assert errors(DatabaseSchema, schema(**timeouts)) == [f"spec.policy.timeouts.apply: {message}"]


def test_the_engine_is_open_but_the_apply_policy_is_an_enum() -> None:
    data = schema(policy={"apply": "Always"})
    data["spec"]["target"]["engine"] = "cockroachdb"  # refused later, at run time
    assert DatabaseSchema.model_validate(data).spec.target.engine == "cockroachdb"
    assert errors(DatabaseSchema, schema(policy={"apply": "Sometimes"})) == [
        "spec.policy.apply: 'Sometimes' is not one of OnApproval, Always, Never"
    ]


def test_an_inline_url_is_refused_without_echoing_it() -> None:
    data = schema()
    data["spec"]["target"]["url"] = "postgresql://app:s3cr3t@db/x"
    found = errors(DatabaseSchema, data)
    assert found == [
        "spec.target.url: a database URL must not be written in Git; reference it with "
        "fromEnv, fromFile or secretKeyRef (the value is not shown)"
    ]
    assert "s3cr3t" not in " ".join(found)


@pytest.mark.parametrize(
    "url",
    [
        {},
        {"fromEnv": "A", "fromFile": "/run/secret"},
        {"fromEnv": "postgres://u:p@h/d"},
        {"value": "postgres://u:p@h/d"},
    ],
)
def test_a_url_reference_names_exactly_one_source(url: dict[str, str]) -> None:
    data = schema()
    data["spec"]["target"]["url"] = url
    found = errors(DatabaseSchema, data)
    assert found and all(e.startswith("spec.target.url") for e in found)
    assert "u:p@" not in " ".join(found)


def test_exactly_one_coordination_name() -> None:
    data = schema()
    data["spec"]["target"]["realm"] = "shared"
    assert errors(DatabaseSchema, data) == [
        "spec.target: set exactly one of coordinationKey or realm"
    ]


def test_unknown_fields_are_refused_everywhere() -> None:
    assert errors(DatabaseSchema, schema(colour="blue")) == ["spec.colour: unknown field"]
    data = schema()
    data["metadata"]["finalizers"] = []
    assert errors(DatabaseSchema, data) == ["metadata.finalizers: unknown field"]


def test_verification_policy_count_cannot_exceed_its_authorities() -> None:
    data = {
        "metadata": {"name": "p"},
        "spec": {
            "artifactTypes": ["application/vnd.seshat.schema.v1"],
            "signatures": {
                "count": 2,
                "authorities": [{"name": "a", "key": {"publicKey": "k.pub"}}],
            },
        },
    }
    assert errors(VerificationPolicy, data) == [
        "spec.signatures: count is 2 but only 1 authorities are listed"
    ]


def test_keyless_identity_needs_one_issuer_and_one_subject_form() -> None:
    identity = {"issuer": "https://i", "issuerRegExp": "https://.*", "subject": "s"}
    data = {
        "metadata": {"name": "p"},
        "spec": {
            "artifactTypes": ["application/vnd.seshat.schema.v1"],
            "signatures": {"authorities": [{"name": "a", "keyless": identity}]},
        },
    }
    assert errors(VerificationPolicy, data) == [
        "spec.signatures.authorities[0].keyless: set exactly one of issuer or issuerRegExp"
    ]


def test_approval_policy_higher_quorums_and_max_age() -> None:
    rule = {
        "approvers": {"allowedSigners": "policies/allowed_signers"},
        "count": 2,
        "privilegeCount": 1,
        "maxAge": "30s",
    }
    data = {"metadata": {"name": "a"}, "spec": {"rules": [rule]}}
    assert errors(ApprovalPolicy, data) == ["spec.rules[0].maxAge: must be between 1m and 366d"]
    rule["maxAge"] = "7d"
    assert errors(ApprovalPolicy, data) == [
        "spec.rules[0]: privilegeCount (1) must not be lower than count (2)"
    ]


def test_config_defaults_and_forge_requirements() -> None:
    config = Config()
    assert (config.spec.branch, config.spec.status_branch) == ("main", "seshat/status")
    assert config.spec.paths == ["databases", "policies", "approvals", "acknowledgments"]
    assert errors(Config, {"spec": {"reviews": {"forge": "github"}}}) == [
        "spec.reviews: forge github needs repository and tokenFromEnv"
    ]


def test_a_status_file_written_with_a_revision_is_read_and_written_without_it() -> None:
    """Status files from before the revision moved to the commit trailer name it at the top
    and in every condition: they are still read (a lost previous status would forget an
    unresolved run), and the revision is never written back."""
    from gitops.resources.approvals import ResourceRef
    from gitops.resources.status import DatabaseMigrationStatus
    from gitops.writeback.status_files import status_bytes

    revision = "0123456789abcdef0123456789abcdef01234567"
    old = {
        "observedRevision": revision,
        "phase": "Blocked",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "RunUnresolved",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
                "observedRevision": revision,
            }
        ],
        "unresolvedRun": {
            "operationId": "0" * 32,
            "planId": "sha256:" + "ab" * 32,
            "outcome": "Partial",
            "recordedAt": "2026-01-02T03:04:05Z",
        },
    }
    status = DatabaseMigrationStatus.model_validate(old)
    assert status.unresolved_run is not None and status.unresolved_run.outcome == "Partial"
    ref = ResourceRef(
        kind="DatabaseMigration",
        namespace="shop",
        name="ledger",
        uid="6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab",
    )
    written = status_bytes(ref, status).decode()
    assert revision not in written and "observedRevision" not in written
    assert "observed_revision" not in DatabaseMigrationStatus.model_fields
    with pytest.raises(ValidationError):  # any other unknown field is still refused
        DatabaseMigrationStatus.model_validate({**old, "observedRevisions": revision})


def test_the_impact_mode_defaults_to_estimate_and_stays_out_of_the_policy_digest() -> None:
    from gitops.reconcile.schema import SchemaPass, schema_policy_digest

    plain = DatabaseSchema.model_validate(schema())
    assert plain.spec.policy.impact == "estimate"
    exact = DatabaseSchema.model_validate(schema(policy={"impact": "exact"}))
    # How figures are measured decides no plan byte: the plan id and its approvals stand.
    assert schema_policy_digest(exact) == schema_policy_digest(plain)
    assert errors(DatabaseSchema, schema(policy={"impact": "always"}))
    assert SchemaPass.refusals["would_fail_on_data"] == "WouldFailOnData"

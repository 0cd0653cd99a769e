"""Expanding a ``DatabaseFleet`` into its members: what each member is, and every problem
located at the fleet file's line (and the members file's, for members read from one)."""

from __future__ import annotations

from pathlib import Path

from gitops.repo.loader import load_repository
from gitops.repo.problems import ResourceKey
from gitops.resources.schema import DatabaseSchema

POLICY = """\
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: ci, namespace: shop}
spec:
  artifactTypes: [application/vnd.seshat.schema.v1]
  signatures: {mode: "off"}
"""


def fleet_yaml(members: str, *, target: str = "", name: str = "tenants") -> str:
    target = target or (
        'target: {engine: sqlite, url: {fromEnv: "TENANT_{{ member.name }}_URL"},\n'
        '               coordinationKey: "tenant-{{member.name}}-{{ member.labels.region }}"}'
    )
    return f"""\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseFleet
metadata: {{name: {name}, namespace: shop, labels: {{team: core}}}}
spec:
  template:
    kind: DatabaseSchema
    spec:
      {target}
      artifact: {{ref: "oci-layout://layouts/tenants:v1", verification: {{policy: ci}}}}
  members:
{members}
  rollout:
    steps: [{{match: {{wave: canary}}, maxParallel: 1, pause: 10m}}, {{maxParallel: "50%"}}]
"""


def repo(tmp_path: Path, fleet: str, members_file: str | None = None) -> Path:
    (tmp_path / "databases").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "ci.yaml").write_text(POLICY)
    (tmp_path / "databases" / "tenants.yaml").write_text(fleet)
    if members_file is not None:
        (tmp_path / "fleets").mkdir()
        (tmp_path / "fleets" / "tenants.yaml").write_text(members_file)
    return tmp_path


LISTED = """\
    list:
      - {name: t1, labels: {region: eu, wave: canary}}
      - {name: t2, labels: {region: us}}
"""


def test_each_member_is_a_full_resource_with_its_values_substituted(tmp_path: Path) -> None:
    repository = load_repository(repo(tmp_path, fleet_yaml(LISTED)))
    assert repository.problems == ()
    members = repository.members("shop", "tenants")
    assert [m.key.name for m in members] == ["tenants/t1", "tenants/t2"]
    first = members[0].resource
    assert isinstance(first, DatabaseSchema)
    assert first.spec.target.url.from_env == "TENANT_t1_URL"
    assert first.spec.target.coordination_key == "tenant-t1-eu"
    assert first.metadata.labels == {"team": "core", "region": "eu", "wave": "canary"}
    assert members[0].member is not None and members[0].member.label_map["wave"] == "canary"
    # Each member has a uid of its own, and the fleet is a resource of its own too.
    assert len({m.resource.metadata.uid for m in members}) == 2
    assert repository.find("DatabaseFleet", "shop", "tenants") is not None


def test_placeholder_problems_name_the_fleet_line_and_the_member(tmp_path: Path) -> None:
    members = "    list:\n      - {name: t1, labels: {region: eu}}\n      - {name: t2}\n"
    target = (
        'target: {engine: sqlite, url: {fromEnv: "{{ member.nme }}"},\n'
        '               coordinationKey: "t-{{ member.labels.region }}"}'
    )
    repository = load_repository(repo(tmp_path, fleet_yaml(members, target=target)))
    lines = sorted(str(p) for p in repository.problems)
    assert lines == [
        "databases/tenants.yaml:8: spec.template.spec.target.url.fromEnv: unknown placeholder "
        "{{ member.nme }}: only {{ member.name }} and {{ member.labels.KEY }} are substituted "
        "(member 't1', listed at databases/tenants.yaml:13)",
        "databases/tenants.yaml:8: spec.template.spec.target.url.fromEnv: unknown placeholder "
        "{{ member.nme }}: only {{ member.name }} and {{ member.labels.KEY }} are substituted "
        "(member 't2', listed at databases/tenants.yaml:14)",
        "databases/tenants.yaml:9: spec.template.spec.target.coordinationKey: member 't2' has "
        "no label 'region' (member 't2', listed at databases/tenants.yaml:14)",
    ]
    # Each problem belongs to its member: the reconciler blocks that member alone.
    assert {p.resource for p in repository.problems} == {
        ResourceKey("DatabaseSchema", "shop", "tenants/t1"),
        ResourceKey("DatabaseSchema", "shop", "tenants/t2"),
    }
    assert repository.members("shop", "tenants") == []


def test_a_member_whose_spec_is_invalid_is_refused_at_the_template_line(tmp_path: Path) -> None:
    target = 'target: {engine: sqlite, url: {fromEnv: "{{ member.labels.env }}"}, realm: r}'
    members = (
        "    list:\n      - {name: ok, labels: {env: OK_URL}}\n"
        "      - {name: bad, labels: {env: 'no-env'}}\n"
    )
    repository = load_repository(repo(tmp_path, fleet_yaml(members, target=target)))
    assert [str(p) for p in repository.problems] == [
        "databases/tenants.yaml:8: spec.template.spec.target.url.fromEnv: must match "
        "^[A-Za-z_][A-Za-z0-9_]*$ (member 'bad', listed at databases/tenants.yaml:13)"
    ]
    assert [m.key.name for m in repository.members("shop", "tenants")] == ["tenants/ok"]


def test_duplicate_member_names_are_both_refused(tmp_path: Path) -> None:
    members = (
        "    list:\n      - {name: t1, labels: {region: eu}}\n"
        "      - {name: t1, labels: {region: us}}\n      - {name: t3, labels: {region: us}}\n"
    )
    repository = load_repository(repo(tmp_path, fleet_yaml(members)))
    assert [str(p) for p in repository.problems] == [
        "databases/tenants.yaml:13: spec.members.list[0].name: member 't1' of fleet 'tenants' "
        "is listed more than once (also at databases/tenants.yaml:14)",
        "databases/tenants.yaml:14: spec.members.list[1].name: member 't1' of fleet 'tenants' "
        "is listed more than once (also at databases/tenants.yaml:13)",
    ]
    assert [m.key.name for m in repository.members("shop", "tenants")] == ["tenants/t3"]


def test_an_invalid_member_name_refuses_the_fleet_at_its_line(tmp_path: Path) -> None:
    members = "    list:\n      - {name: T_3}\n"
    repository = load_repository(repo(tmp_path, fleet_yaml(members)))
    [problem] = repository.problems
    assert str(problem).startswith("databases/tenants.yaml:13: spec.members.list[0].name: must")
    assert repository.find("DatabaseFleet", "shop", "tenants") is None


def test_members_from_a_file_are_located_in_that_file(tmp_path: Path) -> None:
    listing = (
        "- {name: t1, labels: {region: eu}}\n- {name: t2}\n- {name: t3, labels: {region: 7}}\n"
    )
    root = repo(tmp_path, fleet_yaml("    fromFile: fleets/tenants.yaml\n"), listing)
    repository = load_repository(root)
    assert sorted(str(p) for p in repository.problems) == [
        "databases/tenants.yaml:9: spec.template.spec.target.coordinationKey: member 't2' has "
        "no label 'region' (member 't2', listed at fleets/tenants.yaml:2)",
        "fleets/tenants.yaml:3: [2].labels.region: must be a string",
    ]
    assert [m.key.name for m in repository.members("shop", "tenants")] == ["tenants/t1"]


def test_a_members_file_must_exist_and_live_outside_the_declarations(tmp_path: Path) -> None:
    missing = load_repository(repo(tmp_path, fleet_yaml("    fromFile: fleets/none.yaml\n")))
    assert [str(p) for p in missing.problems] == [
        "databases/tenants.yaml:12: spec.members.fromFile: no such file in the repository: "
        "fleets/none.yaml"
    ]
    inside = tmp_path / "inside"
    inside.mkdir()
    root = repo(inside, fleet_yaml("    fromFile: databases/list.yaml\n"))
    (root / "databases" / "list.yaml").write_text("- {name: t1}\n")
    problems = [str(p) for p in load_repository(root).problems]
    assert any("is inside a declaration folder" in p for p in problems), problems


def test_a_fleet_and_a_database_may_not_share_a_name(tmp_path: Path) -> None:
    root = repo(tmp_path, fleet_yaml(LISTED))
    (root / "databases" / "other.yaml").write_text(
        "apiVersion: seshat.dev/v1alpha1\nkind: DatabaseSchema\n"
        "metadata: {name: tenants, namespace: shop}\n"
        "spec:\n  target: {engine: sqlite, url: {fromEnv: X}, realm: x}\n"
        "  artifact: {ref: 'oci-layout://l:v1', verification: {policy: ci}}\n"
    )
    repository = load_repository(root)
    assert any("need different names" in str(p) for p in repository.problems)
    assert repository.members("shop", "tenants") == []


def test_a_members_file_outside_the_repository_is_never_read(tmp_path: Path) -> None:
    """An attacker with commit access names a host file, or links to one: nothing of it is
    read (or shown) as members; the fleet's line says why."""
    secret = tmp_path / "host-secret.yaml"
    secret.write_text("- {name: leaked}\n")
    for case, named in enumerate((str(secret), "../../host-secret.yaml", "fleets/link.yaml")):
        folder = tmp_path / f"repo{case}"
        folder.mkdir()
        repo(folder, fleet_yaml(f"    fromFile: {named}\n"), members_file="[]\n")
        (folder / "fleets" / "link.yaml").symlink_to(secret)
        repository = load_repository(folder)
        assert repository.members("shop", "tenants") == [], named
        said = [str(p) for p in repository.problems]
        assert any("spec.members.fromFile" in p and "tenants.yaml:" in p for p in said), said
        assert not any("leaked" in p for p in said), said

"""``seshat validate`` on deliberately broken repositories prints exactly these lines.

Each fixture repository under ``tests/fixtures/repos`` is broken in many ways at once; the
point is that every problem is reported in one run, located by file, line and field, while
the documents that are fine still load.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.seshat_cli import Run, SeshatRunner, seshat_runner

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "repos"


def validate(repo: Path, *extra: str) -> Run:
    """``seshat validate REPO`` as a process of its own (forked from the worker's server
    that imported the CLI once: harness/forkserver.py)."""
    assert _SESHAT is not None, "the module's fixture sets it"
    return _SESHAT("validate", repo, *extra)


_SESHAT: SeshatRunner | None = None


@pytest.fixture(scope="module", autouse=True)
def _seshat_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    global _SESHAT
    _SESHAT = seshat_runner(tmp_path_factory.mktemp("validate"))
    yield
    _SESHAT = None


EXPECTED = {
    "bad-fields": [
        "databases/app/migrations.yaml:9: spec.target.url: a database URL must not be written "
        "in Git; reference it with fromEnv, fromFile or secretKeyRef (the value is not shown)",
        "databases/app/migrations.yaml:10: spec.target.password: unknown field; credentials are "
        "never written in declarations, reference the database URL with fromEnv, fromFile or "
        "secretKeyRef (the value is not shown)",
        "databases/app/migrations.yaml:13: spec.artifact.ref: must be oci://HOST/REPOSITORY:TAG, "
        "oci://HOST/REPOSITORY@sha256:DIGEST or oci-layout://PATH:TAG",
        "databases/app/migrations.yaml:28: spec.signatures.authorities[0].keyless.subjectRegExp: "
        "is not a valid regular expression: missing ), unterminated subpattern at position 5",
        "databases/app/schema.yaml:7: spec.colour: unknown field",
        "databases/app/schema.yaml:8: spec.target.engine: required field is missing",
        "databases/app/schema.yaml:14: spec.interval: must be between 10s and 24h",
        "databases/app/schema.yaml:16: spec.policy.apply: 'Sometimes' is not one of OnApproval, "
        "Always, Never",
        "databases/app/schema.yaml:17: spec.policy.lockTimeout: must be between 1s and 10m",
    ],
    "bad-files": [
        "databases/bomb.yaml:1: a document expands to more than 100000 nodes through YAML aliases",
        "databases/broken-syntax.yaml:4: invalid YAML: expected ',' or '}', but got ':'",
        'databases/duplicate-key.yaml:7: invalid YAML: duplicate key "artifactTypes"',
        "databases/kinds.yaml:2: kind: 'DatabaseTable' is not one of DatabaseSchema, "
        "DatabaseMigration, DatabaseFleet, VerificationPolicy, ApprovalPolicy, Approval, "
        "RunAcknowledgment",
        "databases/kinds.yaml:5: apiVersion: must be seshat.dev/v1alpha1",
        "databases/kinds.yaml:10: kind: a Config belongs in seshat.yaml at the repository root",
        "databases/kinds.yaml:13: a document must be a mapping",
        "databases/kinds.yaml:20: metadata.uid: the uid is assigned by Seshat; remove it",
        "databases/kinds.yaml:24: status: status is written by Seshat on the status branch; "
        "remove it",
        "databases/latin1.yaml:4: not valid UTF-8 (byte 74)",
    ],
    "bad-references": [
        "approvals/app/web/misplaced.yaml:1: must be stored at approvals/app/web/"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.yaml",
        "databases/app/copy.yaml:1: metadata.name: DatabaseMigration app/jobs is declared more "
        "than once (also at databases/app/jobs.yaml:1)",
        "databases/app/jobs.yaml:1: metadata.name: DatabaseMigration app/jobs is declared more "
        "than once (also at databases/app/copy.yaml:1)",
        "databases/app/web.yaml:13: spec.artifact.verification.policy: no VerificationPolicy "
        "'does-not-exist' in namespace 'app'",
        "databases/app/web.yaml:27: spec.artifact.verification.policy: VerificationPolicy "
        "'escaping' has problems of its own",
        "policies/policies.yaml:11: spec.signatures.authorities[0].key.publicKey: leads outside "
        "the repository",
        "policies/policies.yaml:29: spec.rules[0]: destructiveCount (1) must not be lower than "
        "count (2)",
    ],
    "bad-config": [
        "seshat.yaml:3: spec: statusBranch must differ from the watched branch",
        "seshat.yaml:8: spec.paths[1]: leads outside the repository",
        "seshat.yaml:9: spec.paths[2]: no such folder in the repository",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_prints_every_problem_with_file_line_and_field(name: str) -> None:
    result = validate(FIXTURES / name)
    assert result.stdout.splitlines() == EXPECTED[name]
    assert result.returncode == 1


def test_the_good_documents_of_a_broken_file_still_load() -> None:
    result = validate(FIXTURES / "bad-files", "--format", "json")
    report = json.loads(result.stdout)
    names = [r["metadata"]["name"] for r in report["resources"]]
    assert names == ["fine"]
    assert result.returncode == 1


def test_problems_name_the_resource_they_belong_to() -> None:
    report = json.loads(validate(FIXTURES / "bad-references", "--format", "json").stdout)
    owners = {(p["path"], p["line"]): p["resource"] for p in report["problems"]}
    assert owners[("databases/app/web.yaml", 13)] == "DatabaseSchema/app/web"
    assert owners[("databases/app/copy.yaml", 1)] == "DatabaseMigration/app/jobs"
    assert owners[("policies/policies.yaml", 11)] == "VerificationPolicy/app/escaping"
    assert set(report["problems"][0]) == {"path", "line", "field", "message", "resource"}
    # The migration whose policy is fine is still refused: it is declared twice.
    assert [r["metadata"]["name"] for r in report["resources"]] == ["good"]


def test_an_inline_password_is_never_echoed(tmp_path: Path) -> None:
    for output_format in ("text", "json"):
        result = validate(FIXTURES / "bad-fields", "--format", output_format)
        assert "hunter2" not in result.stdout + result.stderr
        assert "db.internal" not in result.stdout + result.stderr
    # Also not when the password is the value of a duplicated key.
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    (repo / "databases" / "x.yaml").write_text(
        "apiVersion: seshat.dev/v1alpha1\nkind: DatabaseSchema\nmetadata: {name: x}\n"
        "spec:\n  target:\n    url: postgresql://u:hunter2@h/db\n    url: {fromEnv: X}\n"
    )
    result = validate(repo)
    assert result.returncode == 1
    assert "hunter2" not in result.stdout + result.stderr
    assert 'duplicate key "url"' in result.stdout


def test_oversized_files_are_refused_without_being_parsed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    (repo / "databases" / "huge.yaml").write_text("# filler\n" * 120_000)
    result = validate(repo)
    assert result.stdout.splitlines() == [
        "databases/huge.yaml: file is 1080000 bytes; the limit is 1048576"
    ]


def test_a_symlink_leaving_the_repository_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    shutil.copy(FIXTURES.parents[2] / "examples/repo/policies/verification.yaml", outside)
    repo = tmp_path / "repo"
    (repo / "policies").mkdir(parents=True)
    (repo / "approvals").mkdir()
    (repo / "policies" / "link.yaml").symlink_to(outside)
    (repo / "approvals" / "out").symlink_to(tmp_path, target_is_directory=True)
    (repo / "databases").symlink_to(tmp_path, target_is_directory=True)
    result = validate(repo)
    assert result.stdout.splitlines() == [
        "approvals/out: symbolic link leads outside the repository",
        "databases: symbolic link leads outside the repository",
        "policies/link.yaml: symbolic link leads outside the repository",
    ]
    assert result.returncode == 1


def test_validate_exit_codes() -> None:
    examples = FIXTURES.parents[2] / "examples" / "repo"
    ok = validate(examples)
    assert (ok.returncode, ok.stdout) == (0, "")
    assert ok.stderr.strip() == "10 valid resources, no problems"
    missing = validate(FIXTURES / "no-such-repository")
    assert missing.returncode == 2
    assert "not a folder" in missing.stderr


def _database(kind: str, name: str) -> str:
    return (
        f"apiVersion: seshat.dev/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}, namespace: "
        "app}\nspec:\n  target: {engine: sqlite, url: {fromEnv: X}, coordinationKey: k}\n"
        "  artifact: {ref: 'oci://r.test/a/b:v1', verification: {policy: ci}}\n"
    )


POLICY = (
    "apiVersion: seshat.dev/v1alpha1\nkind: VerificationPolicy\nmetadata: {name: ci, "
    "namespace: app}\nspec:\n  artifactTypes: [application/vnd.seshat.schema.v1]\n"
    "  signatures: {mode: off}\n"
)


def test_names_that_cannot_be_a_status_file_or_a_review_branch_are_refused(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    (repo / "databases" / "policy.yaml").write_text(POLICY)
    names = {"dots": "cat..v2", "lock": "cat.lock", "long": "a" * 251, "fine": "a" * 250}
    for file, name in names.items():
        (repo / "databases" / f"{file}.yaml").write_text(_database("DatabaseSchema", name))
    result = validate(repo, "--format", "json")
    report = json.loads(result.stdout)
    refused = {p["path"]: p["message"] for p in report["problems"]}
    assert set(refused) == {"databases/dots.yaml", "databases/lock.yaml", "databases/long.yaml"}
    assert "must not end in .lock" in refused["databases/lock.yaml"]
    assert "at most 250 characters" in refused["databases/long.yaml"]
    assert [
        r["metadata"]["name"] for r in report["resources"] if r["kind"] != "VerificationPolicy"
    ] == ["a" * 250]


def test_a_schema_and_a_migration_may_not_share_a_name(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    (repo / "databases" / "policy.yaml").write_text(POLICY)
    (repo / "databases" / "schema.yaml").write_text(_database("DatabaseSchema", "orders"))
    (repo / "databases" / "migrations.yaml").write_text(_database("DatabaseMigration", "orders"))
    result = validate(repo)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "databases/migrations.yaml:3: metadata.name: app/orders is also the name of a "
        "DatabaseSchema at databases/schema.yaml:1; a DatabaseSchema, a DatabaseMigration and a "
        "DatabaseFleet need different names (they would share a status file and a review "
        "branch)",
        "databases/schema.yaml:3: metadata.name: app/orders is also the name of a "
        "DatabaseMigration at databases/migrations.yaml:1; a DatabaseSchema, a "
        "DatabaseMigration and a DatabaseFleet need different names (they would share a status "
        "file and a review "
        "branch)",
    ]


def _schema_with(name: str, extra: str) -> str:
    return _database("DatabaseSchema", name) + extra + "\n"


def test_one_hostile_value_is_a_problem_of_its_own_file(tmp_path: Path) -> None:
    """Values that crashed the loader (a kind that is not text, YAML tags with nonsense,
    dates, huge integers) are problems of their file; every other resource still loads."""
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    (repo / "databases" / "policy.yaml").write_text(POLICY)
    (repo / "databases" / "fine.yaml").write_text(_database("DatabaseSchema", "fine"))
    header = "apiVersion: seshat.dev/v1alpha1\n"
    hostile = {
        "kind-list": f"{header}kind: [DatabaseSchema]\nmetadata: {{name: a}}\n",
        "kind-map": f"{header}kind: {{a: 1}}\nmetadata: {{name: b}}\n",
        "date": _schema_with("c", "  interval: 2020-02-30"),
        "int-tag": _schema_with("d", "  interval: !!int abc"),
        "float-tag": _schema_with("e", "  interval: !!float abc"),
        "timestamp-tag": _schema_with("f", "  interval: !!timestamp nonsense"),
        "huge-int": _schema_with("g", "  interval: " + "9" * 5000),
    }
    for file, text in hostile.items():
        (repo / "databases" / f"{file}.yaml").write_text(text)
    result = validate(repo, "--format", "json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    kinds = (
        "DatabaseSchema, DatabaseMigration, DatabaseFleet, VerificationPolicy, ApprovalPolicy, "
        "Approval"
    )
    duration = "must be a duration such as 30s, 10m or 1h30m"
    assert [(p["path"], p["line"], p["field"], p["message"]) for p in report["problems"]] == [
        ("databases/date.yaml", 7, "spec.interval", duration),
        ("databases/float-tag.yaml", 7, "", "invalid YAML: not a number"),
        ("databases/huge-int.yaml", 7, "", "invalid YAML: an integer of more than 4300 digits"),
        ("databases/int-tag.yaml", 7, "", "invalid YAML: not an integer"),
        ("databases/kind-list.yaml", 2, "kind", f"must be one of {kinds}, RunAcknowledgment"),
        ("databases/kind-map.yaml", 2, "kind", f"must be one of {kinds}, RunAcknowledgment"),
        ("databases/timestamp-tag.yaml", 7, "spec.interval", duration),
    ]
    assert sorted(r["metadata"]["name"] for r in report["resources"]) == ["ci", "fine"]


def test_a_duration_in_digits_that_are_not_ascii_is_a_problem_of_its_line(
    tmp_path: Path,
) -> None:
    """``１０m`` (full-width) read as ten minutes before: Python's ``\\d`` and ``int`` take any
    script's digits, the CRD's pattern and every other reader of the file do not."""
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    (repo / "databases" / "policy.yaml").write_text(POLICY)
    (repo / "databases" / "wide.yaml").write_text(
        _schema_with("wide", '  interval: "１０m"\n  retryInterval: "٣٠s"'), encoding="utf-8"
    )
    (repo / "databases" / "timeouts.yaml").write_text(
        _schema_with("timeouts", "  policy:\n    timeouts: {apply: 1h, plan: ５m}"),
        encoding="utf-8",
    )
    result = validate(repo)
    assert result.returncode == 1, result.stderr
    duration = "must be a duration such as 30s, 10m or 1h30m"
    assert result.stdout.splitlines() == [
        f"databases/timeouts.yaml:8: spec.policy.timeouts.plan: {duration}",
        f"databases/wide.yaml:7: spec.interval: {duration}",
        f"databases/wide.yaml:8: spec.retryInterval: {duration}",
    ]


def test_only_regular_files_inside_the_repository_are_read(tmp_path: Path) -> None:
    """seshat.yaml leading outside is refused without echoing its keys; a FIFO does not
    hang the loader; a device is never read."""
    outside = tmp_path / "outside.yaml"
    outside.write_text("secret-key-name: 1\n")
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    (repo / "seshat.yaml").symlink_to(outside)
    (repo / "databases" / "policy.yaml").write_text(POLICY)
    os.mkfifo(repo / "databases" / "fifo.yaml")
    (repo / "databases" / "zero.yaml").symlink_to("/dev/zero")
    (repo / "databases" / "inside.yaml").symlink_to("policy.yaml")
    (repo / "databases" / "dangling.yaml").symlink_to("nowhere.yaml")
    result = validate(repo)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "databases/dangling.yaml: is a symbolic link to nothing",
        "databases/fifo.yaml: is not a regular file",
        "databases/zero.yaml: symbolic link leads outside the repository",
        "seshat.yaml: is a symbolic link that leads outside the repository",
    ]
    assert "secret-key-name" not in result.stdout + result.stderr


MISSING = "apiVersion: required field is missing"


def test_the_problems_of_one_file_are_capped_with_a_count_of_the_rest(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    # 250 documents without apiVersion: one problem each, document n on line 2n.
    (repo / "databases" / "many.yaml").write_text("---\na: 1\n" * 250)
    (repo / "databases" / "other.yaml").write_text("---\na: 1\n" * 2)
    result = validate(repo)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 100 + 1 + 2
    assert lines[:100] == [f"databases/many.yaml:{2 * n}: {MISSING}" for n in range(1, 101)]
    assert lines[100] == "databases/many.yaml: ... and 150 more problems in this file"
    # The count and the JSON report are complete; only the text listing is capped.
    assert lines[101:] == [f"databases/other.yaml:{n}: {MISSING}" for n in (2, 4)]
    assert result.stderr.strip() == "0 valid resources, 252 problems in 2 files"
    report = json.loads(validate(repo, "--format", "json").stdout)
    assert len(report["problems"]) == 252
    # One more than the cap says "1 more problem".
    (repo / "databases" / "many.yaml").write_text("---\na: 1\n" * 101)
    lines = validate(repo).stdout.splitlines()
    assert lines[100] == "databases/many.yaml: ... and 1 more problem in this file"


def test_a_file_of_a_hundred_thousand_tiny_documents_is_refused_without_reading_them(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / "databases").mkdir(parents=True)
    tiny = "---\na: 1\n"
    (repo / "databases" / "tiny.yaml").write_text(tiny * (1024 * 1024 // len(tiny)))
    (repo / "databases" / "empty.yaml").write_text("---\n" * 200_000)
    (repo / "databases" / "most.yaml").write_text(tiny * 1000)  # the most a file may hold
    # Committed, so the uid history walk reads the files too (and must stop as early).
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "-m", "tiny"], check=True)
    result = validate(repo)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "databases/empty.yaml: more than 1000 YAML documents in one file; split it"
    assert lines[1:101] == [f"databases/most.yaml:{2 * n}: {MISSING}" for n in range(1, 101)]
    assert lines[101:] == [
        "databases/most.yaml: ... and 900 more problems in this file",
        "databases/tiny.yaml:2002: more than 1000 YAML documents in one file; split it",
    ]
    assert result.stderr.strip() == "0 valid resources, 1002 problems in 3 files"

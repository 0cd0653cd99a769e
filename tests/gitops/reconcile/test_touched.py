"""Which resources a push touches: reconciled at once by ``seshat run``, the others left to
their schedule (gitops/reconcile/touched.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.reconcile.touched import Touched, touched_by
from gitops.repo.loader import Repository, load_repository
from gitops.repo.problems import ResourceKey
from gitops.repo.uids import uid_from

KEY = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"


def _schema(name: str, namespace: str, policy: str, key: str | None = None, ref: str = "") -> str:
    ref = ref or f"oci://registry.example/{name}:v1"
    return f"""\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseSchema
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  target: {{engine: sqlite, url: {{fromEnv: DB_URL}}, coordinationKey: {key or name}}}
  artifact: {{ref: "{ref}", verification: {{policy: {policy}}}}}
"""


def _policy(name: str, namespace: str, key_file: str) -> str:
    return f"""\
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  artifactTypes: [application/vnd.seshat.schema.v1]
  signatures: {{authorities: [{{name: ci, key: {{publicKey: {key_file}}}}}]}}
"""


APPROVERS = """\
apiVersion: seshat.dev/v1alpha1
kind: ApprovalPolicy
metadata: {name: approvers, namespace: shop}
spec:
  rules:
    - match: {names: ["ord*"]}
      approvers: {allowedSigners: policies/allowed_signers}
"""


class _Uids:
    def uid_for(self, key: ResourceKey) -> str:
        return uid_from(key, "0" * 40)


def _key(name: str, namespace: str = "shop") -> ResourceKey:
    return ResourceKey("DatabaseSchema", namespace, name)


@pytest.fixture
def repository(tmp_path: Path) -> Repository:
    """shop/orders and shop/billing share one database (a realm, both Blocked by the census),
    shop/catalogue uses another policy and an OCI layout in the repository, crm/leads lives
    in another namespace."""
    files = {
        "policies/ci.pub": KEY,
        "policies/other.pub": KEY,
        "policies/allowed_signers": "alice@example.com ssh-ed25519 AAAA\n",
        "policies/shop.yaml": _policy("ci", "shop", "policies/ci.pub")
        + "---\n"
        + _policy("other", "shop", "policies/other.pub")
        + "---\n"
        + APPROVERS,
        "policies/crm.yaml": _policy("ci", "crm", "policies/ci.pub"),
        "policies/unused.yaml": _policy("unused", "crm", "policies/other.pub"),
        "databases/orders.yaml": _schema("orders", "shop", "ci", key="shared"),
        "databases/billing.yaml": _schema("billing", "shop", "ci", key="shared"),
        "databases/catalogue.yaml": _schema(
            "catalogue", "shop", "other", ref="oci-layout://artifacts/catalogue:v1"
        ),
        "databases/crm/leads.yaml": _schema("leads", "crm", "ci"),
        "artifacts/catalogue/index.json": "{}",
        "README.md": "the shop's databases\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    loaded = load_repository(tmp_path, uids=_Uids())
    assert loaded.problems == ()
    return loaded


def _touched(repository: Repository, *paths: str) -> set[str]:
    found = touched_by(repository, paths)
    assert not found.everything, found.why
    return {f"{key.namespace}/{key.name}" for key in found.keys}


def test_a_declaration_edit_touches_its_resource_and_whoever_shares_its_database(
    repository: Repository,
) -> None:
    assert _touched(repository, "databases/crm/leads.yaml") == {"crm/leads"}
    # Changing one claimant of a database can end (or start) the realm conflict of the other.
    assert _touched(repository, "databases/orders.yaml") == {"shop/orders", "shop/billing"}


def test_an_approval_or_acknowledgment_touches_the_resource_it_names(
    repository: Repository,
) -> None:
    hexed = "ab" * 32
    # The statement, its signatures, also when it was deleted (nothing of it loads now).
    assert _touched(repository, f"approvals/shop/catalogue/{hexed}.yaml") == {"shop/catalogue"}
    assert _touched(repository, f"approvals/shop/catalogue/{hexed}.yaml.sig") == {"shop/catalogue"}
    assert _touched(repository, "acknowledgments/crm/leads/00ff00ff00ff00ff.yaml") == {"crm/leads"}
    assert _touched(repository, f"approvals/shop/gone/{hexed}.yaml") == set()


def test_a_policy_edit_touches_the_resources_that_use_it(repository: Repository) -> None:
    # The file holds the shop's two VerificationPolicies and its ApprovalPolicy: all of
    # the shop's resources use one of them; crm's use a policy of their own.
    assert _touched(repository, "policies/shop.yaml") == {
        "shop/orders",
        "shop/billing",
        "shop/catalogue",
    }
    assert _touched(repository, "policies/crm.yaml") == {"crm/leads"}
    # A key is part of every policy that names it, in any namespace.
    assert _touched(repository, "policies/other.pub") == {"shop/catalogue"}
    assert _touched(repository, "policies/ci.pub") == {"shop/orders", "shop/billing", "crm/leads"}
    # The allowed signers matter to the resources the ApprovalPolicy's rules match.
    assert _touched(repository, "policies/allowed_signers") == {"shop/orders"}


def test_an_artifact_in_the_repository_touches_the_resource_that_reads_it(
    repository: Repository,
) -> None:
    assert _touched(repository, "artifacts/catalogue/index.json") == {"shop/catalogue"}


def test_an_unrelated_file_touches_nothing(repository: Repository) -> None:
    assert _touched(repository, "README.md", "src/app.py", "policies/notes.txt") == set()
    # A declaration that loads, of a policy nobody uses, is not a reason to run everything.
    assert _touched(repository, "policies/unused.yaml") == set()


@pytest.mark.parametrize(
    "changed",
    [
        None,  # the diff could not be computed (history rewritten under the controller)
        ["seshat.yaml"],
        ["databases/removed.yaml"],  # it declared something: maybe someone's realm partner
        ["README.md", "databases/crm/leads.yaml", "policies/extra.yml"],
    ],
)
def test_what_cannot_be_attributed_touches_everything(
    repository: Repository, changed: list[str] | None
) -> None:
    found = touched_by(repository, changed)
    assert found.everything
    assert _key("orders") in found and _key("leads", "crm") in found


def test_a_declaration_with_a_problem_touches_everything(tmp_path: Path) -> None:
    (tmp_path / "databases").mkdir()
    (tmp_path / "databases" / "broken.yaml").write_text("kind: DatabaseSchema\n")
    repository = load_repository(tmp_path, uids=_Uids())
    assert repository.problems
    assert touched_by(repository, ["databases/broken.yaml"]) == Touched(
        True, why="databases/broken.yaml"
    )

"""OCI artifacts: formats, transport (registry and OCI layout), fetching by digest, signatures
and their verification against a VerificationPolicy. The person-facing commands are
``seshat artifact`` (gitops/artifacts/cli.py)."""

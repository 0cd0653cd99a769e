"""Trust: verifying signatures made by identities rather than by keys in the repository."""

"""Signed statements in the repository: approvals of plans and acknowledgments of runs."""

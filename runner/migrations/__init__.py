"""Versioned migrations: files and checksums, the revision history, verdicts, apply."""

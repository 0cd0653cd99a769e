"""The MySQL/MariaDB schema engine (see docs/engine.md)."""

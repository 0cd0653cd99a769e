"""SQL text handling shared by engines and migrations: splitting statements (``split``,
``split_mysql``), reading them as each server lexes them (``tokens``), and what a desired
schema may hold (``classify``)."""

__all__: list[str] = []

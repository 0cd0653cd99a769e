"""SQL text handling shared by engines and migrations (splitting statements)."""

__all__: list[str] = []

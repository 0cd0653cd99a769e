"""Writing what Seshat decided back to Git: the status branch, its files and commits."""

"""The control plane's loop: one pass over the repository's resources, lifecycle by lifecycle."""

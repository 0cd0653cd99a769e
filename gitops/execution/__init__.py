"""Running operations: the executor interface and the local subprocess executor."""

"""Kubernetes mode: runner Jobs, ``coordination.k8s.io`` Leases, custom resource status."""

"""OCI artifacts: packaging, transport (registry and OCI layout), fetching, signatures."""

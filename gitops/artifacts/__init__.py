"""``seshat artifact``: the person-facing commands over the OCI client in ``runner/artifacts``."""

"""kernelfarm: the command line and the embedded single-host stack (composition root)."""

"""The REST API (FastAPI, versioned under /v1)."""

"""``json``: the farm's own versioned schema (:class:`~kernelfarm.core.exports.model.BestExport`)."""

from __future__ import annotations

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports.model import SCHEMA_NAME, SCHEMA_VERSION, BestExport


def write(export: BestExport) -> str:
    return export.model_dump_json(indent=2) + "\n"


def read(text: str) -> BestExport:
    """Parse an export, refusing another schema or a newer major version with a clear reason."""
    try:
        export = BestExport.model_validate_json(text)
    except ValueError as exc:
        raise InvalidInput(f"not a {SCHEMA_NAME} file: {exc}") from None
    if export.schema_version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise InvalidInput(
            f"{SCHEMA_NAME} version {export.schema_version} is not readable (this reads {SCHEMA_VERSION})"
        )
    return export

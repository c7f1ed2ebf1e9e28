"""Uploaded kernels, as KernelSpecs: read from the farm's database, checked again, built, and kept
in a local, content-addressed cache directory (the measuring child reads its bundle from there: it
has no database URL).

A pinned version (name and number) never changes, so its spec is cached in the process for good;
"the latest version" asks the database each time.
"""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path

from sqlalchemy.orm import Session

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import KernelVersion
from kernelfarm.core.settings import get_settings
from kernelfarm.core.store import kernel_versions as version_store
from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import InvalidManifest, check_bundle, read_bundle
from kernelfarm.kernels.spec import KernelSpec

_lock = threading.Lock()
_by_version: dict[tuple[str, int], KernelSpec] = {}


def cache_root() -> Path:
    configured = get_settings().kernel_cache
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "kernelfarm-kernels"


def spec_of_row(row: KernelVersion) -> KernelSpec:
    """The KernelSpec of a stored version (built once per process and version)."""
    key = (row.name, row.version)
    with _lock:
        found = _by_version.get(key)
    if found is not None:
        return found
    manifest = json.loads(row.manifest)
    uploads = {name: text.encode() for name, text in row.files.items()}
    recording = manifest.get("recording", {}).get("file")
    if recording and row.recording is not None:
        uploads[recording] = bytes(row.recording)
    bundle = check_bundle(manifest, uploads, stored=True)
    directory = cache_root() / bundle.content_hash
    spec = build_spec(bundle, row.version, directory)
    with _lock:
        _by_version[key] = spec
    return spec


def uploaded_kernel(name: str, version: int | None = None, session: Session | None = None) -> KernelSpec:
    """The uploaded kernel ``name`` at ``version`` (None: the latest).

    Raises:
        NotFound: no such upload.
    """
    if version is not None:
        with _lock:
            found = _by_version.get((name, version))
        if found is not None:
            return found
    if session is not None:
        return spec_of_row(version_store.get_version(session, name, version))
    with session_scope() as own:
        return spec_of_row(version_store.get_version(own, name, version))


def spec_from_directory(directory: Path, version: int) -> KernelSpec:
    """A version from its materialized bundle, without the database (the measuring child).

    Raises:
        InvalidManifest: the files are not the content the directory is named for. The cache is
            shared by a host's processes (by default under the temp folder, open to every local
            user): a bundle written over there, a header or a Python reference, was measured as the
            version.
    """
    key = (directory.name, version)
    with _lock:
        found = _by_version.get(key)
    if found is None:
        bundle = read_bundle(directory)
        if bundle.content_hash != directory.name:
            raise InvalidManifest(
                f"{directory}: its files are not the content it is named for (they hash to "
                f"{bundle.content_hash[:16]}...): written over on this host; set KERNELFARM_KERNEL_CACHE to a "
                "folder only the farm's user can write"
            )
        found = build_spec(bundle, version, directory)
        with _lock:
            _by_version[key] = found
    return found


def bundle_directory(spec: KernelSpec) -> Path | None:
    """Where an uploaded kernel's bundle is materialized; None for other kernels."""
    from kernelfarm.kernels.manifest.cuda import ManifestCudaKernel

    impl = spec.impls.get("cuda")
    return impl.directory if isinstance(impl, ManifestCudaKernel) else None

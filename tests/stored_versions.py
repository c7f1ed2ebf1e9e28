"""Uploaded kernels as the tests store them: a version stored as an upload before a check it fails was
(the upload's checks skipped), and a kernel name whose versions, jobs and trials are deleted after."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any

from sqlalchemy import delete, select

from kernelfarm.core.db import session_scope
from kernelfarm.core.models import Job, Kernel, KernelVersion, Trial
from kernelfarm.core.store import kernel_versions as version_store
from tests.kernels.manifests import user_uploads


@contextlib.contextmanager
def fresh_kernel_name(database_url: str, prefix: str) -> Iterator[str]:
    """A kernel name no other test uses; its versions, jobs and trials are deleted after."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    try:
        yield name
    finally:
        with session_scope(database_url) as session:
            jobs = select(Job.id).where(Job.kernel_name == name).scalar_subquery()
            session.execute(delete(Trial).where(Trial.job_id.in_(jobs)))
            session.execute(delete(Job).where(Job.kernel_name == name))
            session.execute(delete(KernelVersion).where(KernelVersion.name == name))
            session.execute(delete(Kernel).where(Kernel.name == name))


def store_unchecked(database_url: str, manifest: dict[str, Any]) -> None:
    """``manifest`` with the user kernel's files, stored as its name's next version without the upload's
    checks: a version stored before a check it fails was added."""
    files = {name: data.decode() for name, data in user_uploads().items()}
    with session_scope(database_url) as session:
        version_store.add_version(session, version_store.NewVersion(
            name=manifest["name"], content_hash=secrets.token_hex(16), manifest=json.dumps(manifest), files=files,
            recording=None, owner="unchecked-owner"))  # fmt: skip

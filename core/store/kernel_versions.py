"""Uploaded kernels as rows: immutable, content-addressed, numbered per name.

The store keeps what was uploaded (a manifest, its files, a recording) without reading it: checking
it and building a kernel from it is the kernels layer's job (kernels/manifest/).

A name belongs to whoever uploaded its first version: only a token of that name, or an admin, may add
versions to it. Without that rule any ``kernels`` token could make its own code the latest version of
another owner's kernel, which every job that does not pin a version would then measure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from kernelfarm.core.errors import Forbidden, NoSuchVersion, NotFound
from kernelfarm.core.models import KernelVersion
from kernelfarm.core.store.locks import hold_until_commit


@dataclass(frozen=True)
class NewVersion:
    name: str
    content_hash: str
    manifest: str  # JSON text, as the kernels layer wrote it (key order kept)
    files: Mapping[str, str]
    recording: bytes | None
    owner: str
    by_admin: bool = False  # an admin may add a version to any owner's name


def add_version(session: Session, new: NewVersion) -> tuple[KernelVersion, bool]:
    """Store an upload as the name's next version, unless the same content is stored already.

    Returns:
        (the row, True when it was created now; False: the same content existed, as that version).

    Raises:
        Forbidden: the name belongs to another owner and the uploader is not an admin.
    """
    existing = by_hash(session, new.content_hash)
    if existing is not None:
        return existing, False
    # Serialize uploads of one name so two of them cannot take the same version number.
    hold_until_commit(session, f"kernel_versions:{new.name}")
    owner = name_owner(session, new.name)
    if owner is not None and owner != new.owner and not new.by_admin:
        raise Forbidden(
            f"manifest.name: {new.name!r} belongs to {owner!r}; only a token named {owner!r} or an admin token"
            " can add a version to it (choose another name)"
        )
    latest = session.execute(select(func.max(KernelVersion.version)).where(KernelVersion.name == new.name)).scalar()
    statement = (
        insert(KernelVersion)
        .values(
            name=new.name,
            version=(latest or 0) + 1,
            content_hash=new.content_hash,
            manifest=new.manifest,
            files=dict(new.files),
            recording=new.recording,
            owner=new.owner,
        )
        .on_conflict_do_nothing(index_elements=["content_hash"])
        .returning(KernelVersion.id)
    )
    created = session.execute(statement).scalar()
    row = session.get_one(KernelVersion, created) if created is not None else by_hash(session, new.content_hash)
    assert row is not None
    return row, created is not None


def name_owner(session: Session, name: str) -> str | None:
    """Who uploaded the name's first version (None: the name is free)."""
    query = select(KernelVersion.owner).where(KernelVersion.name == name).order_by(KernelVersion.version).limit(1)
    return session.execute(query).scalar_one_or_none()


def by_hash(session: Session, content_hash: str) -> KernelVersion | None:
    return session.execute(select(KernelVersion).where(KernelVersion.content_hash == content_hash)).scalar_one_or_none()


def possible_name(name: str) -> bool:
    """Whether an upload could have ``name`` (manifest names are short identifiers). Other names never
    reach PostgreSQL, which refuses a NUL in a query parameter: the API answered with a 500, or a
    dropped connection."""
    return name.isprintable() and len(name) <= 128


def get_version(session: Session, name: str, version: int | None = None) -> KernelVersion:
    """The given version of an uploaded kernel, or its latest.

    Raises:
        NoSuchVersion: the kernel is stored, but not at ``version`` (naming the versions it has).
        NotFound: no such kernel.
    """
    if not possible_name(name):
        raise NotFound(f"no uploaded kernel {name!r}")
    query = select(KernelVersion).where(KernelVersion.name == name)
    query = query.where(KernelVersion.version == version) if version is not None else query
    row = session.execute(query.order_by(KernelVersion.version.desc()).limit(1)).scalar_one_or_none()
    if row is not None:
        return row
    if version is not None and (stored := version_numbers(session, name)):
        raise NoSuchVersion(name, version, stored)
    raise NotFound(f"no uploaded kernel {name!r}" + (f" version {version}" if version is not None else ""))


def versions(session: Session, name: str) -> Sequence[KernelVersion]:
    if not possible_name(name):
        return ()
    return (
        session.execute(select(KernelVersion).where(KernelVersion.name == name).order_by(KernelVersion.version))
        .scalars()
        .all()
    )


def version_numbers(session: Session, name: str) -> list[int]:
    """The kernel's version numbers, oldest first (without reading the rows' files)."""
    query = select(KernelVersion.version).where(KernelVersion.name == name).order_by(KernelVersion.version)
    return list(session.execute(query).scalars())


def latest_versions(session: Session) -> Sequence[KernelVersion]:
    """The latest version of every uploaded kernel, by name."""
    latest = select(KernelVersion.name, func.max(KernelVersion.version).label("version")).group_by(KernelVersion.name)
    sub = latest.subquery()
    query = select(KernelVersion).join(
        sub, (KernelVersion.name == sub.c.name) & (KernelVersion.version == sub.c.version)
    )
    return session.execute(query.order_by(KernelVersion.name)).scalars().all()

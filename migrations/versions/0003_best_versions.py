"""best versions: a stamp that changes whenever a best-config answer may have changed

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 07:00:00.000000

The API caches best-config answers per process and re-reads this small table at most every
``best_cache_seconds`` (api/best_cache.py). The triggers bump the stamp in the same transaction as
the write they react to, so a reader that sees the new row also sees the new stamp:

- ``best_versions[kernel]``: a trial of that kernel became complete and verified and no committed
  trial of its group (kernel source, GPU model, problem) is faster, i.e. it may be a new best or a
  new group for the nearest-problem fallback; or a counted trial was changed or deleted.
- ``best_versions['']``: a GPU worker row appeared, went away or changed model or compute capability
  (the same-architecture fallback reads them), or trials/gpu_workers were truncated.

Bumping only on a possible improvement keeps the stamp (and the row lock it takes until commit) off
the path of most result writes: after the first few trials of a job, a completed trial is rarely
the fastest.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTED = "{row}.state = 'complete' AND {row}.verified"

FUNCTIONS = [
    """
    CREATE FUNCTION kf_bump_best_version(target text) RETURNS void LANGUAGE sql AS $$
        INSERT INTO best_versions (scope, version) VALUES (target, 1)
        ON CONFLICT (scope) DO UPDATE SET version = best_versions.version + 1
    $$
    """,
    f"""
    CREATE FUNCTION kf_trials_best_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' AND {COUNTED.format(row="OLD")} THEN
            -- finished trials never change: this is a repair or a deletion, always a new answer
            PERFORM kf_bump_best_version(OLD.kernel_name);
        END IF;
        IF TG_OP <> 'DELETE' AND {COUNTED.format(row="NEW")} AND NOT EXISTS (
            SELECT 1 FROM trials t JOIN jobs j ON j.id = t.job_id
            WHERE t.kernel_name = NEW.kernel_name AND t.gpu_model = NEW.gpu_model
              AND t.problem_key = NEW.problem_key AND t.state = 'complete' AND t.verified
              AND j.kernel_id = (SELECT kernel_id FROM jobs WHERE id = NEW.job_id)
              -- the lookup's order: time, then id
              AND (t.time_ms < NEW.time_ms OR (t.time_ms = NEW.time_ms AND t.id < NEW.id))
        ) THEN
            PERFORM kf_bump_best_version(NEW.kernel_name);
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION kf_bump_global_best_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM kf_bump_best_version('');
        RETURN NULL;
    END
    $$
    """,
]

TRIGGERS = [
    f"""CREATE TRIGGER trials_best_version_insert AFTER INSERT ON trials FOR EACH ROW
        WHEN ({COUNTED.format(row="NEW")}) EXECUTE FUNCTION kf_trials_best_version()""",
    f"""CREATE TRIGGER trials_best_version_update AFTER UPDATE ON trials FOR EACH ROW
        WHEN (({COUNTED.format(row="NEW")}) OR ({COUNTED.format(row="OLD")}))
        EXECUTE FUNCTION kf_trials_best_version()""",
    f"""CREATE TRIGGER trials_best_version_delete AFTER DELETE ON trials FOR EACH ROW
        WHEN ({COUNTED.format(row="OLD")}) EXECUTE FUNCTION kf_trials_best_version()""",
    """CREATE TRIGGER trials_best_version_truncate AFTER TRUNCATE ON trials FOR EACH STATEMENT
        EXECUTE FUNCTION kf_bump_global_best_version()""",
    """CREATE TRIGGER gpu_workers_best_version_insert_delete AFTER INSERT OR DELETE ON gpu_workers
        FOR EACH ROW EXECUTE FUNCTION kf_bump_global_best_version()""",
    """CREATE TRIGGER gpu_workers_best_version_update AFTER UPDATE ON gpu_workers FOR EACH ROW
        WHEN (OLD.gpu_model IS DISTINCT FROM NEW.gpu_model
              OR OLD.compute_capability IS DISTINCT FROM NEW.compute_capability)
        EXECUTE FUNCTION kf_bump_global_best_version()""",
    """CREATE TRIGGER gpu_workers_best_version_truncate AFTER TRUNCATE ON gpu_workers FOR EACH STATEMENT
        EXECUTE FUNCTION kf_bump_global_best_version()""",
]


def upgrade() -> None:
    op.create_table(
        "best_versions",
        sa.Column("scope", sa.String(length=128), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("scope"),
    )
    for statement in FUNCTIONS + TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    for table, name in [
        ("gpu_workers", "gpu_workers_best_version_truncate"),
        ("gpu_workers", "gpu_workers_best_version_update"),
        ("gpu_workers", "gpu_workers_best_version_insert_delete"),
        ("trials", "trials_best_version_truncate"),
        ("trials", "trials_best_version_delete"),
        ("trials", "trials_best_version_update"),
        ("trials", "trials_best_version_insert"),
    ]:
        op.execute(f"DROP TRIGGER {name} ON {table}")
    for function in ("kf_bump_global_best_version()", "kf_trials_best_version()", "kf_bump_best_version(text)"):
        op.execute(f"DROP FUNCTION {function}")
    op.drop_table("best_versions")

"""The API against its own OpenAPI schema (issue 18, item 8): schemathesis' CLI, every phase
(examples, coverage, fuzzing and the stateful phase that follows the schema's links), with a read, a
submit and an admin token, over HTTP against a real API process. Zero server errors and zero
violations of the schema (status codes, content types, headers, bodies) are allowed.

The jobs it creates are bounded (the API runs with small budget and parallelism limits, and no
coordinator steps them) and cancelled at the end; the tokens it creates are revoked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select, update

from kernelfarm import launcher
from kernelfarm.core.db import session_scope
from kernelfarm.core.models import ApiToken, Job
from kernelfarm.core.store.jobs import cancel_job
from kernelfarm.services import free_port
from kernelfarm.stack import api_ready
from tests.conftest import Farm, make_token, wait_for

# Checks that judge the API against its schema. Left out, with why:
#  positive_data_acceptance - a schema-valid job can still be impossible (unknown kernel, a problem the
#    kernel lacks, an empty space): the API answers 422 with the reason, as it should.
#  ignored_auth, object_level_authorization, use_after_free, ensure_resource_availability - run too
#    (they are in CHECKS) where they apply.
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
          "response_schema_conformance,negative_data_rejection,missing_required_header,unsupported_method,"
          "use_after_free,ensure_resource_availability,ignored_auth")  # fmt: skip
OWNER_PREFIX = "schemathesis-"


@pytest.fixture(scope="module")
def fuzzed_api(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    farm = Farm(database_url, redis_url, tmp_path_factory.mktemp("schemathesis"))
    started = datetime.now(UTC)
    try:
        port = free_port()
        farm.api_url = f"http://127.0.0.1:{port}"
        farm.start("api", launcher.api_argv(port), KERNELFARM_MAX_BUDGET_TRIALS="20", KERNELFARM_MAX_PARALLELISM="4",
                   KERNELFARM_MAX_SPACE_SIZE="1000")  # fmt: skip
        wait_for(lambda: farm.check_running() and api_ready(farm.api_url), 30, "API")
        yield farm
    finally:
        farm.stop_all()
        with session_scope(database_url) as session:
            fuzzed = session.execute(
                select(Job.id).where(Job.owner.startswith(OWNER_PREFIX), Job.state.in_(["queued", "running"]))
            ).scalars()
            for job_id in fuzzed.all():
                cancel_job(session, job_id)
            session.execute(  # tokens the admin run created
                update(ApiToken).where(ApiToken.created_at >= started, ApiToken.revoked_at.is_(None),
                                       ApiToken.name.not_like("schemathesis-%")).values(revoked_at=datetime.now(UTC))
            )  # fmt: skip


@pytest.mark.parametrize("scope", ["read", "submit", "admin"])
def test_every_phase_finds_no_server_error_and_no_schema_violation(
    fuzzed_api: Farm, database_url: str, tmp_path: Path, scope: str
) -> None:
    token = make_token(database_url, scope, name=f"{OWNER_PREFIX}{scope}")
    report = tmp_path / "report.json"
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run", f"{fuzzed_api.api_url}/openapi.json",
        "--phases", "examples,coverage,fuzzing,stateful", "--checks", CHECKS,
        "--max-examples", "15", "--seed", "18", "--workers", "1", "--request-timeout", "20",
        "--header", f"Authorization: Bearer {token}", "--suppress-health-check", "all",
        "--report", "json", "--report-json-path", str(report), "--output-truncate", "true",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert report.exists() and json.loads(report.read_text())  # it ran and reported

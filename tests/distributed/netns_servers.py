"""Starts PostgreSQL and Redis for the network-namespace test, from inside the server namespace.

Run as ``ip netns exec <srv> python tests/distributed/netns_servers.py DIR``: both servers bind every
address of that namespace (only loopback and the test's own veths exist there), Postgres admits
the test's private 10.213.0.0/16 subnet, the schema is migrated, and one admin token is made.
Prints one JSON line with what the test needs; the servers keep running after it exits.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sqlalchemy import create_engine, text

from kernelfarm.core.db import session_scope
from kernelfarm.core.migrate import upgrade
from kernelfarm.core.store.tokens import create_token
from kernelfarm.services import EmbeddedPostgres, EmbeddedRedis

PG_PORT, REDIS_PORT = 5432, 6379  # fixed: the namespace is ours alone, nothing else can hold them
SUBNET = "10.213.0.0/16"


def main(directory: Path) -> None:
    postgres = EmbeddedPostgres(directory / "pg", host="0.0.0.0", port=PG_PORT)
    postgres.start()
    # initdb --auth=trust only admits loopback; the workers come from the other namespaces.
    with open(postgres.data_dir / "pg_hba.conf", "a") as hba:
        hba.write(f"host all all {SUBNET} trust\n")
    local_url = f"postgresql+psycopg2://postgres@127.0.0.1:{PG_PORT}/postgres"
    engine = create_engine(local_url)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_reload_conf()"))
    engine.dispose()
    redis = EmbeddedRedis(directory / "redis", host="0.0.0.0", port=REDIS_PORT)
    redis.start()
    upgrade(local_url)
    with session_scope(local_url) as session:
        token = create_token(session, "netns-test", ["admin"])
    print(json.dumps({"pg_dir": str(postgres.data_dir), "redis_pid": redis.pid, "token": token}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

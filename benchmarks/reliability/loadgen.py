"""The load generator of benchmarks/reliability/load.py: its own process, pinned to one CPU, cheap.

    python -m benchmarks.reliability.loadgen SPEC.json  →  RESULT.json on stdout

Open loop: request ``i`` of a phase is due at ``start + i / rate`` whatever the server does, and its
latency is measured from that due time, so time spent waiting for a free connection or a stalled
server counts (no coordinated omission). ``clients`` keep-alive connections take the due requests
in order; with all of them busy, due requests wait and their latency grows.

The HTTP/1.1 client is a few lines over asyncio streams, and each request's bytes are built once.
The httpx client used before, in the harness process, cost 1.81 ms of CPU per request (measured at
200 requests/s, 36 % of a core on the 2-core machine the server also runs on); this one costs
0.37-0.44 ms. It reads every response to the end (by Content-Length; the API never answers chunked)
and records its status. A broken connection is reopened and the request counts as status 599.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Spec:
    api_url: str
    token: str
    rate: float  # lookups per second
    seconds: float
    clients: int
    lookups: list[dict[str, Any]]  # query parameters, used in turn
    submit_rate: float = 0.0
    submit_body: dict[str, Any] = field(default_factory=dict)
    cpu: int | None = None  # pin this process to one CPU


@dataclass
class Outcome:
    latencies_ms: list[float] = field(default_factory=list)  # lookups, from their due time
    submit_latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)  # "lookup 200": count, "submit 201": …
    job_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0  # first due request to last answer
    cpu_seconds: float = 0.0  # this process, user + system


def _request(method: str, path: str, host: str, token: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _exchange(
    connection: Connection | None, host: str, port: int, request: bytes
) -> tuple[int, bytes, Connection | None]:
    """Send one request (opening the connection first if needed) and read its whole response.
    Returns the status, the body and the connection to reuse (None: the server closes it)."""
    if connection is None:
        connection = await asyncio.open_connection(host, port)
    reader, writer = connection
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, keep = 0, True
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            keep = False
    body = await reader.readexactly(length) if length else b""
    if not keep:
        writer.close()
    return status, body, connection if keep else None


async def _run(spec: Spec) -> Outcome:
    url = urlsplit(spec.api_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    lookups = [_request("GET", "/v1/best?" + urlencode(q, doseq=True), host, spec.token) for q in spec.lookups]
    submit = _request("POST", "/v1/jobs", host, spec.token, json.dumps(spec.submit_body).encode())
    start = time.perf_counter() + 0.2
    n_lookups = int(spec.rate * spec.seconds)
    schedule = [(start + i / spec.rate, "lookup", lookups[i % len(lookups)]) for i in range(n_lookups)]
    if spec.submit_rate > 0:
        n_submits = int(spec.submit_rate * spec.seconds)
        schedule += [(start + i / spec.submit_rate, "submit", submit) for i in range(n_submits)]
    due = deque(sorted(schedule, key=lambda item: item[0]))
    out = Outcome()

    def count(kind: str, status: int) -> None:
        key = f"{kind} {status}"
        out.statuses[key] = out.statuses.get(key, 0) + 1

    async def client() -> None:
        connection: Connection | None = None
        while due:
            at, kind, request = due.popleft()
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                status, body, connection = await asyncio.wait_for(_exchange(connection, host, port, request), TIMEOUT_S)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
                status, body = 599, b""
                if connection is not None:
                    connection[1].close()
                connection = None
            done = time.perf_counter()
            last[0] = max(last[0], done)
            if kind == "lookup":
                out.latencies_ms.append((done - at) * 1e3)
            else:
                out.submit_latencies_ms.append((done - at) * 1e3)
                if status == 201:
                    out.job_ids.append(json.loads(body)["id"])
            count(kind, status)
        if connection is not None:
            connection[1].close()

    last = [start]
    await asyncio.gather(*(client() for _ in range(spec.clients)))
    out.seconds = last[0] - start  # first due request to last answer
    return out


def generate(spec: Spec) -> Outcome:
    if spec.cpu is not None:
        os.sched_setaffinity(0, {spec.cpu})
    before = resource.getrusage(resource.RUSAGE_SELF)
    out = asyncio.run(_run(spec))
    after = resource.getrusage(resource.RUSAGE_SELF)
    out.cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = Spec(**json.load(handle))
    json.dump(asdict(generate(spec)), sys.stdout)


if __name__ == "__main__":
    main()

"""`kernelfarm serve-api --workers N`: accepted connections have Nagle off (TCP_NODELAY).

uvicorn binds the socket of its worker processes with proto 0 and asyncio then leaves Nagle on,
which made every keep-alive request after the first wait ~40 ms for the client's delayed ACK."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import uvicorn

from kernelfarm import launcher
from kernelfarm.commands.serve import tcp_listener
from kernelfarm.services import free_port, wait_for
from kernelfarm.stack import spawn, stop_processes


def test_the_listener_hands_asyncio_tcp_sockets() -> None:
    config = uvicorn.Config("kernelfarm.api.app:create_app", host="127.0.0.1", port=free_port(), workers=2)
    listener = tcp_listener(config.bind_socket())
    assert listener.proto == socket.IPPROTO_TCP

    async def accepted_nodelay() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname())
        result = await seen
        writer.close()
        server.close()
        return result

    assert asyncio.run(accepted_nodelay()) == 1


def keep_alive_ms(port: int, requests: int = 20) -> list[float]:
    """Sequential GET /health on one keep-alive connection, as a CI script would make them."""
    connection = socket.create_connection(("127.0.0.1", port))
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    stream = connection.makefile("rb")
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        connection.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
        assert stream.readline().startswith(b"HTTP/1.1 200")
        length = 0
        while (line := stream.readline()) != b"\r\n":
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        stream.read(length)
        times.append((time.perf_counter() - started) * 1e3)
    connection.close()
    return times


def test_two_workers_answer_keep_alive_requests_without_the_delayed_ack_wait(
    database_url: str, redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = launcher.component_env(database_url, redis_url)
    api = spawn("api", launcher.api_argv(port, workers=2), env, tmp_path)
    try:
        wait_for(lambda: _answers(port), 60, "the API")
        times = sorted(keep_alive_ms(port))
        assert times[len(times) // 2] < 20, times  # was ~44 ms each after the first
    finally:
        stop_processes([api], grace=15)


def _answers(port: int) -> bool:
    try:
        return keep_alive_ms(port, requests=1)[0] > 0
    except (OSError, AssertionError):
        return False

"""A real S3-compatible server on 127.0.0.1 for the object-storage tests: moto's server mode in
its own process, behind `Gate`, a TCP forwarder that a test can close (clients then get
"connection refused", as when a store goes away) and open again on the same port with the data
intact. Requests are counted from the server's own access log."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from tests.helpers.processes import stop_process

_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # the access log colours lines by status

_ACCESS = re.compile(r'"(GET|PUT|POST|DELETE|HEAD) (\S+) HTTP/1\.[01]" (\d{3})')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class MotoServer:
    """`python -m moto.server` on a free port of 127.0.0.1; its access log in `log_path`."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - the server writes it until stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(self.port)
        except RuntimeError:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.proc, grace=10)
        self._log.close()

    def log_offset(self) -> int:
        return self.log_path.stat().st_size

    def requests(self, since: int = 0, bucket: str | None = None) -> Counter[str]:
        """Requests served since log offset `since` (to `bucket` only, when given), by kind:
        LIST, GET, HEAD, PUT, DELETE (a batched delete, POST ?delete, counts once)."""
        return Counter(kind for kind, _key in self.request_log(since, bucket))

    def request_log(self, since: int = 0, bucket: str | None = None) -> list[tuple[str, str]]:
        """(kind, path) of each request served since log offset `since`, in order (to `bucket`
        only, when given); the path is "/bucket/key" without the query."""
        with open(self.log_path, "rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
        log = []
        for method, target, _status in _ACCESS.findall(_COLOUR.sub("", text)):
            path, _, query = target.partition("?")
            if bucket is not None and path.strip("/").split("/", 1)[0] != bucket:
                continue
            log.append((request_kind(method, path, query), path))
        return log


def request_kind(method: str, path: str, query: str) -> str:
    if method == "GET" and path.strip("/").count("/") == 0:
        return "LIST"  # GET on the bucket itself: a listing
    if method == "POST" and "delete" in query:
        return "DELETE"
    return method


_503_BODY = (
    b"<Error><Code>ServiceUnavailable</Code><Message>Please reduce your request rate.</Message>"
    b"</Error>"
)
_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_503_BODY), _503_BODY)
)


class Gate:
    """A TCP forwarder from a port of 127.0.0.1 to `target_port`: `close()` drops every
    connection and stops listening (connection refused), `open()` listens again. While
    `faults` > 0, each new connection takes one and gets `fault` instead of the server: "503"
    (an S3 error answer to its first request, then closed) or "hang" (no answer at all).
    `delay` (seconds) holds back each piece of the server's answers that long, as a network
    between a client and a distant store would (a small answer: one round trip later).
    `connections` counts the connections forwarded to the server."""

    def __init__(self, target_port: int, delay: float = 0.0) -> None:
        self.delay = delay
        self.connections = 0
        self.fault = "503"
        self.faults = 0
        self.target_port = target_port
        self.port = free_port()
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.open()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(OSError):  # shutdown wakes the thread blocked in accept()
                server.shutdown(socket.SHUT_RDWR)
            server.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            with self._lock:
                faulty = self.faults > 0
                self.faults -= 1 if faulty else 0
                if faulty:
                    self._conns.append(client)
            if faulty:
                threading.Thread(target=_misbehave, args=(client, self.fault), daemon=True).start()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
                self.connections += 1
            for a, b, delay in ((client, upstream, 0.0), (upstream, client, self.delay)):
                threading.Thread(target=_pump, args=(a, b, delay), daemon=True).start()


def _misbehave(client: socket.socket, fault: str) -> None:
    try:
        if fault == "503":
            client.recv(65536)
            client.sendall(_503)
            client.shutdown(socket.SHUT_RDWR)
        else:  # "hang": hold the connection without a word until the gate closes it
            while client.recv(65536):
                pass
    except OSError:
        pass


def _pump(source: socket.socket, sink: socket.socket, delay: float = 0.0) -> None:
    try:
        while data := source.recv(65536):
            if delay:
                time.sleep(delay)
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

"""API keys: every route needs ``Authorization: Bearer KEY`` but /health, /metrics and the two
that hold no one's data: the web page (/, which asks for the key itself) and /openapi.json."""

from __future__ import annotations

import hashlib
import json
import secrets

from starlette.types import ASGIApp, Receive, Scope, Send

from hpdparse.wire import error_body

OPEN_PATHS = frozenset({"/health", "/metrics", "", "/openapi.json"})  # "": "/" stripped


class ApiKeys:
    """The accepted keys, kept as SHA-256 digests and compared in constant time (every key is
    compared, so the time does not tell which one nearly matched)."""

    def __init__(self, keys: list[str]) -> None:
        self._digests = [hashlib.sha256(key.encode()).digest() for key in keys]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def problem(self, authorization: str | None) -> str | None:
        """Why a request with this Authorization header is refused, or None if it is not."""
        if not authorization:
            return "this server needs an API key: send the header Authorization: Bearer KEY"
        token = bearer_token(authorization)
        if token is None:
            return "the Authorization header must be Bearer KEY"
        digest = hashlib.sha256(token.encode()).digest()
        matched = False
        for known in self._digests:
            matched |= secrets.compare_digest(digest, known)
        return None if matched else "invalid API key"


def bearer_token(authorization: str | None) -> str | None:
    """The KEY of an Authorization header ``Bearer KEY``; None for any other header."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class AuthMiddleware:
    """Pure ASGI middleware: a 401 in the OpenAI error format before the app sees the request."""

    def __init__(self, app: ASGIApp, keys: ApiKeys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not self.keys
            or scope.get("method") == "OPTIONS"
            or scope["path"].rstrip("/") in OPEN_PATHS
        ):
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
                break
        problem = self.keys.problem(header)
        if problem is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps(error_body(401, problem)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})

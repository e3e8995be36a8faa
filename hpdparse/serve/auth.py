"""API keys: every route needs ``Authorization: Bearer KEY`` but /health, /metrics and the two
that hold no one's data: the web page (/, which asks for the key itself) and /openapi.json."""

from __future__ import annotations

import hashlib
import json
import secrets

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Scope

from hpdparse.wire import error_body

OPEN_PATHS = frozenset({"/health", "/metrics", "", "/openapi.json"})  # "": "/" stripped


class ApiKeys:
    """The accepted keys, kept as SHA-256 digests and compared in constant time (every key is
    compared, so the time does not tell which one nearly matched)."""

    def __init__(self, keys: list[str]) -> None:
        self._digests = [hashlib.sha256(key.encode()).digest() for key in keys]

    def refusal(self, scope: Scope) -> Response | None:
        """The 401 answer (an OpenAI error body) to an HTTP request without an accepted key;
        None for a server without keys, an open path or a CORS preflight (OPTIONS)."""
        if not self._digests or scope.get("method") == "OPTIONS":
            return None
        if scope["path"].rstrip("/") in OPEN_PATHS:
            return None
        authorization = Headers(scope=scope).get("authorization")
        token = bearer_token(authorization)
        if not authorization:
            problem = "this server needs an API key: send the header Authorization: Bearer KEY"
        elif token is None:
            problem = "the Authorization header must be Bearer KEY"
        else:
            digest = hashlib.sha256(token.encode()).digest()
            if sum(secrets.compare_digest(digest, known) for known in self._digests):
                return None
            problem = "invalid API key"
        body = json.dumps(error_body(401, problem))
        headers = {"WWW-Authenticate": "Bearer"}
        return Response(body, 401, headers, media_type="application/json")


def bearer_token(authorization: str | None) -> str | None:
    """The KEY of an Authorization header ``Bearer KEY``; None for any other header."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None

"""The openai engine's log-probabilities: it asks for ``logprobs: true`` (unless the engine
option `logprobs` is off), cuts an answer's ``choices[0].logprobs.content`` into the page's
blocks by their token texts, and copes with a server that gives none: an answer without them,
or a 4xx refusal naming the parameter (the page is sent again without it, and so are the pages
after it), leaves the pages' confidences null, with one warning for the run, not one a page.
"""

from __future__ import annotations

import json
import logging

from hpdparse.hpd.logprobs import PageLogprobs
from hpdparse.hpd.protocol import BLOCK, CHILD, ENDOFTEXT, FORK, IM_END

log = logging.getLogger(__name__)

STOP_TOKENS = (IM_END, ENDOFTEXT)
_MARKERS = frozenset({CHILD, FORK})
PARAMETER = "logprobs"


def page_logprobs(pairs: list[tuple[str, float]] | None) -> PageLogprobs | None:
    """The answer's (token, log-probability) pairs cut into blocks by their token texts (stop
    tokens at the end left out, as they are from the text); None when there are none."""
    if not pairs:
        return None
    while pairs and pairs[-1][0] in STOP_TOKENS:
        pairs = pairs[:-1]
    tokens = [token for token, _ in pairs]
    return PageLogprobs.split(
        tokens, [value for _, value in pairs], lambda t: t == BLOCK, _MARKERS.__contains__
    )


class LogprobsAsk:
    """Whether requests ask for log-probabilities, and the one warning when a server has none."""

    def __init__(self, wanted: bool, server: str) -> None:
        self.asking = wanted
        self._server = server
        self._warned = False

    def refused(self, status: int, answer: str, request: bytes) -> bool:
        """Whether an error answer refuses the logprobs parameter of `request` (a 4xx whose body
        names it); then no later request asks for them, and this page is to be sent again."""
        if not 400 <= status < 500 or PARAMETER not in answer:
            return False
        if PARAMETER not in json.loads(request):
            return False
        if self.asking:
            self.asking = False
            self._warn(f"refused logprobs (HTTP {status})")
        return True

    def read(self, pairs: list[tuple[str, float]] | None) -> PageLogprobs | None:
        """The page's log-probabilities from an answer's pairs (warns once when asked and none
        came)."""
        page = page_logprobs(pairs)
        if page is None and self.asking:
            self._warn("answered without log-probabilities")
        return page

    def _warn(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "server %s %s: its pages get confidence null (--engine-option logprobs=false "
                "stops asking)",
                self._server,
                what,
            )


def without_logprobs(body: bytes) -> bytes:
    """A request body without its logprobs parameters."""
    data = json.loads(body)
    data.pop(PARAMETER, None)
    data.pop("top_logprobs", None)
    return json.dumps(data).encode("ascii")

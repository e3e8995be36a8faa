"""Incremental detokenization of a streamed page, as vLLM's own incremental detokenizer does it.

Each new batch of settled tokens is decoded together with the previous batch (so that a
character split across the two decodes whole) and the new text is the difference. While the
text ends in U+FFFD (an incomplete UTF-8 sequence) it is held back until the next tokens
complete it; what is still held at the end comes from the page's final text.
"""

from __future__ import annotations

from collections.abc import Callable

_INCOMPLETE = "\ufffd"


class IncrementalText:
    """The text of a growing token sequence, handed out in pieces."""

    def __init__(self, detokenize: Callable[[list[int]], str]) -> None:
        self._detokenize = detokenize
        self._ids: list[int] = []
        self._prefix = 0  # start of the window decoded for context
        self._read = 0  # tokens whose text has been handed out
        self._sent: list[str] = []

    def add(self, token_ids: list[int]) -> str:
        """The new text these tokens complete ("" while it ends in an incomplete character)."""
        if not token_ids:
            return ""
        self._ids.extend(token_ids)
        before = self._detokenize(self._ids[self._prefix : self._read])
        now = self._detokenize(self._ids[self._prefix :])
        if len(now) <= len(before) or now.endswith(_INCOMPLETE):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        delta = now[len(before) :]
        self._sent.append(delta)
        return delta

    def rest(self, final_text: str) -> str:
        """What is left to send once the page's final text is known. ValueError if the text
        handed out is not the start of it (the client could not be given the right answer)."""
        sent = "".join(self._sent)
        if not final_text.startswith(sent):
            raise ValueError(
                f"streamed text ({len(sent)} characters) is not the start of the page's text"
            )
        self._sent = [final_text]
        return final_text[len(sent) :]

"""`--text-layer prefer`: a page's children answered from the PDF's own text instead of decoded.

When the parent branch writes ``<BLOCK>label [x1, y1, x2, y2]<FORK>`` for a text-like label and
the PDF's text inside that box is trusted (sources/text_layer.py), the child is born finished
with that text, tokenized (hpd/fork_tree.py's `answer`): the splice, the raw page and `render`
work as for a decoded child, and the model decodes only tables, formulas, figures, code and the
blocks whose text layer is missing or untrusted. The vllm and torch engines use it in fork mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpdparse.hpd.labels import role_of
from hpdparse.hpd.stream import parse_header
from hpdparse.sources.text_layer import TEXT_ROLES, PageText, box_text


class FileAnswers:
    """The `answer` of one page's fork tree: the tokens of the PDF's text in the box of the
    block being forked, or None to decode it. `tokenizer` is the checkpoint's (the `tokenizers`
    library's Tokenizer) and `block_id` the ``<BLOCK>`` token id."""

    def __init__(self, text: PageText, tokenizer: Any, block_id: int) -> None:
        self._text = text
        self._tokenizer = tokenizer
        self._block_id = block_id

    def __call__(self, prefix: Sequence[int]) -> list[int] | None:
        """`prefix`: the parent's tokens before the ``<FORK>``; the header is what follows its
        last ``<BLOCK>``."""
        tail = []
        for token in reversed(prefix):
            if token == self._block_id:
                break
            tail.append(token)
        else:
            return None  # no header: content before the first <BLOCK>
        header = self._tokenizer.decode(tail[::-1], skip_special_tokens=False)
        label, box = parse_header(header)
        if box is None or role_of(label) not in TEXT_ROLES:
            return None
        found = box_text(self._text, box)
        if not found.trusted:
            return None
        return list(self._tokenizer.encode(found.text, add_special_tokens=False).ids)


def file_answers(text: PageText | None, tokenizer: Any, ids: Any, forks: bool) -> Any:
    """The `answer` for a page's fork tree: None (decode every child) without a text layer or
    in plain (``--no-fork``) decoding. `ids`: the protocol's token ids (hpd.prompt.TokenIds)."""
    if text is None or not forks or not text.words:
        return None
    return FileAnswers(text, tokenizer, ids.block)

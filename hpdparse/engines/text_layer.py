"""`--text-layer prefer`: a page's children answered from the PDF's own text instead of decoded.

When the parent branch writes ``<BLOCK>label [x1, y1, x2, y2]<FORK>`` for a text-like label and
the PDF's text inside that box is trusted (sources/text_layer.py), the child is born finished
with that text, tokenized (hpd/fork_tree.py's `answer`): the splice, the raw page and `render`
work as for a decoded child, and the model decodes only tables, formulas, figures, code and the
blocks whose text layer is missing or untrusted. The vllm and torch engines use it in fork mode.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from hpdparse.hpd.labels import role_of
from hpdparse.hpd.stream import parse_header
from hpdparse.sources.text_layer import TEXT_ROLES, PageText, box_text


def file_answers(text: PageText | None, tokenizer: Any, ids: Any, forks: bool) -> Any:
    """The `answer` of a page's fork tree: a function of the parent's tokens before a
    ``<FORK>`` that gives the tokens of the PDF's text in the box of the block being forked, or
    None to decode it. None itself (decode every child) without a text layer or in plain
    (``--no-fork``) decoding. `tokenizer` is the checkpoint's (the `tokenizers` library's
    Tokenizer), `ids` the protocol's token ids (hpd.prompt.TokenIds)."""
    if text is None or not forks or not text.words:
        return None
    return functools.partial(_answer, text, tokenizer, ids.block)


def _answer(
    text: PageText, tokenizer: Any, block_id: int, prefix: Sequence[int]
) -> list[int] | None:
    """`file_answers`' function; the block's header is what follows the last ``<BLOCK>``
    (`block_id`) of `prefix`."""
    if block_id not in prefix:
        return None  # no header: content before the first <BLOCK>
    start = len(prefix) - list(prefix)[::-1].index(block_id)
    header = tokenizer.decode(list(prefix[start:]), skip_special_tokens=False)
    label, box = parse_header(header)
    if box is None or role_of(label) not in TEXT_ROLES:
        return None
    found = box_text(text, box)
    if not found.trusted:
        return None
    return list(tokenizer.encode(found.text, add_special_tokens=False).ids)

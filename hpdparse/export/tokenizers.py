"""The tokenizer that counts chunk tokens (`--chunk-tokenizer`).

The default must work offline, with no download: it is the Tekken tokenizer of Mistral NeMo (a
tiktoken BPE of 131k tokens) whose file the `mistral-common` wheel ships. Any other is a Hugging
Face tokenizer id (from the local cache when offline) or a local folder, loaded by transformers.

Nothing here imports docling-core's chunker package: it imports transformers and torch (about 6
CPU-seconds), which only a Hugging Face tokenizer or docling-core's HybridChunker
(`docling_chunker.py`) needs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from hpdparse.errors import HpdparseError
from hpdparse.export import tekken_joins

if TYPE_CHECKING:
    from docling_core.transforms.chunker.tokenizer.base import BaseTokenizer

DEFAULT_TOKENIZER = "tekken"  # how --chunk-tokenizer's default is named in the chunk files
_TEKKEN_FILE = "tekken_240718.json"


class TokenizerError(HpdparseError):
    """--chunk-tokenizer names a tokenizer that cannot be loaded."""


@dataclass(frozen=True)
class ChunkTokenizer:
    """The tokenizer that counts chunk tokens: Tekken (`hugging_face` None) or a Hugging Face
    tokenizer in docling-core's wrapper."""

    hugging_face: BaseTokenizer | None = None


@functools.cache
def _tekken() -> Any:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    data = resources.files("mistral_common") / "data" / _TEKKEN_FILE
    with resources.as_file(data) as path:
        return Tekkenizer.from_file(path)


@functools.lru_cache(maxsize=1 << 16)
def _tekken_count(text: str) -> int:
    # The chunkers count the same texts again and again (each block, then windows of blocks).
    return len(_tekken_encoder()(text))


@functools.cache
def _tekken_encoder() -> Callable[[str], list[int]]:
    """Tekkenizer.encode's token ids, as many but not shifted: its tiktoken encoder, when it has
    one (mistral-common shifts every id in Python, half the time of a count). Tekken's tiktoken
    model declares no special tokens, so `encode_ordinary` gives the same ids as `encode`
    without its search of the text for special tokens (half the time again)."""
    import tiktoken  # mistral-common's own dependency

    tekken = _tekken()
    model = getattr(tekken, "_model", None)
    if isinstance(model, tiktoken.Encoding):
        return model.encode if model.special_tokens_set else model.encode_ordinary
    return functools.partial(tekken.encode, bos=False, eos=False)


@functools.cache
def _hugging_face(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


def token_counter(tokenizer: ChunkTokenizer) -> Callable[[str], int]:
    """`tokenizer`'s token count of a text, remembered: the chunker counts the same texts again
    and again (each block, then windows of blocks)."""
    if tokenizer.hugging_face is None:
        return _tekken_count
    return functools.lru_cache(maxsize=1 << 14)(tokenizer.hugging_face.count_tokens)


def joined_counter(tokenizer: ChunkTokenizer) -> Callable[[list[str]], int]:
    """`parts -> count of "\n\n".join(parts)`: from the parts' remembered counts for the
    default Tekken tokenizer (`tekken_joins`), else by counting the joined text."""
    count = token_counter(tokenizer)
    if tokenizer.hugging_face is None and _tekken_encoder_pattern() == tekken_joins.PATTERN:
        return tekken_joins.joined_counter(count)
    return lambda parts: count(tekken_joins.JOIN.join(parts))


@functools.cache
def _tekken_encoder_pattern() -> str | None:
    return getattr(getattr(_tekken(), "_model", None), "_pat_str", None)


def load_tokenizer(name: str | None, max_tokens: int) -> ChunkTokenizer:
    """The tokenizer `name` (None: the default), counting up to `max_tokens` a chunk; loaded once
    per process. TokenizerError (one line) when it cannot be loaded."""
    if name is None or name == DEFAULT_TOKENIZER:
        _tekken()  # read once, here, so that a broken install fails before any work
        return ChunkTokenizer()
    from docling_core.transforms.chunker.tokenizer.huggingface import HuggingFaceTokenizer

    try:
        tokenizer = _hugging_face(name)
    except Exception as exc:  # transformers raises OSError, ValueError, hub errors...
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenizerError(f"--chunk-tokenizer {name}: cannot load it: {first_line}") from None
    wrapped = HuggingFaceTokenizer(tokenizer=tokenizer, max_tokens=max_tokens)
    return ChunkTokenizer(wrapped)

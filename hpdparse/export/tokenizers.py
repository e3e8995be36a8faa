"""The tokenizer that counts chunk tokens (`--chunk-tokenizer`).

The default must work offline, with no download: it is the Tekken tokenizer of Mistral NeMo (a
tiktoken BPE of 131k tokens) whose file the `mistral-common` wheel ships. Any other is a Hugging
Face tokenizer id (from the local cache when offline) or a local folder, loaded by transformers."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from docling_core.transforms.chunker.tokenizer.base import BaseTokenizer
from pydantic import ConfigDict

from hpdparse.errors import HpdparseError

DEFAULT_TOKENIZER = "tekken"  # how --chunk-tokenizer's default is named in the chunk files
_TEKKEN_FILE = "tekken_240718.json"


class TokenizerError(HpdparseError):
    """--chunk-tokenizer names a tokenizer that cannot be loaded."""


class TekkenTokenizer(BaseTokenizer):
    """docling-core's tokenizer interface over mistral-common's bundled Tekken tokenizer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tekken: Any
    max_tokens: int

    def count_tokens(self, text: str) -> int:
        return _tekken_count(text)

    def get_max_tokens(self) -> int:
        return self.max_tokens

    def get_tokenizer(self) -> Any:
        return self.tekken


@functools.cache
def _tekken() -> Any:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    data = resources.files("mistral_common") / "data" / _TEKKEN_FILE
    with resources.as_file(data) as path:
        return Tekkenizer.from_file(path)


@functools.lru_cache(maxsize=1 << 16)
def _tekken_count(text: str) -> int:
    # HybridChunker counts the same texts again and again (each block, then windows of blocks).
    return len(_tekken().encode(text, bos=False, eos=False))


@functools.cache
def _hugging_face(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


def load_tokenizer(name: str | None, max_tokens: int) -> BaseTokenizer:
    """The tokenizer `name` (None: the default), counting up to `max_tokens` a chunk; loaded once
    per process. TokenizerError (one line) when it cannot be loaded."""
    if name is None or name == DEFAULT_TOKENIZER:
        return TekkenTokenizer(tekken=_tekken(), max_tokens=max_tokens)
    from docling_core.transforms.chunker.tokenizer.huggingface import HuggingFaceTokenizer

    try:
        tokenizer = _hugging_face(name)
    except Exception as exc:  # transformers raises OSError, ValueError, hub errors...
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenizerError(f"--chunk-tokenizer {name}: cannot load it: {first_line}") from None
    return HuggingFaceTokenizer(tokenizer=tokenizer, max_tokens=max_tokens)

"""`LocalEngine`: the base of the engines that run a checkpoint in this process (vllm, torch).

``open()`` resolves the checkpoint once, reading only JSON: a local folder, or a hub id looked
up (or fetched) with huggingface_hub, whose snapshot gives the commit. `info` records that
commit for every such engine, so pages one of them decoded are reused by the others for the
same checkpoint (the reuse key holds model, revision, prompt and max tokens, not the engine).
Both engines take the page as HPD tiles (`preparer`), read the checkpoint's tokenizer, token ids
and prompt the same way (`_load_tokenizer`) and answer children from the text layer alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from PIL import Image

from hpdparse.engines.base import Engine, PageRequest
from hpdparse.engines.text_layer import file_answers
from hpdparse.errors import EngineError
from hpdparse.hpd.tiling import tile_image


class LocalEngine(Engine):
    """An engine with a local checkpoint; subclasses load it in start()."""

    answers_from_text_layer = True
    _tokenizer: Any = None  # the checkpoint's, set by _load_tokenizer()
    ids: Any = None  # the protocol's token ids (hpd.prompt.TokenIds)
    prompts: Any = None  # hpd.prompt.PromptBuilder

    def open(self) -> None:
        _ = self.checkpoint

    @functools.cached_property
    def checkpoint(self) -> Any:
        """The resolved checkpoint (hpd.checkpoint.Checkpoint), opened on first use."""
        from hpdparse.hpd.checkpoint import open_checkpoint

        return open_checkpoint(self.config.model, self.config.revision)

    @property
    def tiling(self) -> Any:
        """The checkpoint's HPD tiling (opened on first use)."""
        return self.checkpoint.config.tiling

    @property
    def revision(self) -> str | None:
        return self.checkpoint.revision

    def preparer(self) -> Callable[[Image.Image], Any]:
        """Page image -> HPD tiles, uint8 (N, t, t, 3), or (N, t, t, 1) for a grey page; floats
        (3 channels) are made on the device."""
        return functools.partial(tile_image, config=self.tiling)

    def _load_tokenizer(self) -> None:
        """The checkpoint's tokenizer, the protocol's token ids and the prompt builder."""
        from hpdparse.hpd.prompt import PromptBuilder, load_tokenizer, token_ids

        ckpt = self.checkpoint
        self._tokenizer = load_tokenizer(ckpt.path, ckpt.model_id)
        self.ids = token_ids(self._tokenizer, ckpt.config, ckpt.model_id)
        chat_template = ckpt.chat_template()
        if isinstance(chat_template, list):  # a list of named templates: take "default"
            named = {t.get("name"): t.get("template") for t in chat_template}
            chat_template = named.get("default")
        self.prompts = PromptBuilder(self._tokenizer, self.ids, chat_template)

    def answers(self, request: PageRequest) -> Any:
        """The page's children answered from its text layer (--text-layer prefer), or None."""
        return file_answers(request.text_layer, self._tokenizer, self.ids, self.config.fork)

    def detokenize(self, token_ids: list[int]) -> str:
        if self._tokenizer is None:
            raise EngineError(f"{self.name} engine: not started")
        return self._tokenizer.decode(token_ids, skip_special_tokens=False)

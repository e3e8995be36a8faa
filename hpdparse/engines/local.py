"""`LocalEngine`: the base of the engines that run a checkpoint in this process (vllm, torch).

``open()`` resolves the checkpoint once, reading only JSON: a local folder, or a hub id looked
up (or fetched) with huggingface_hub, whose snapshot gives the commit. `info` records that
commit for every such engine, so pages one of them decoded are reused by the others for the
same checkpoint (the reuse key holds model, revision, prompt and max tokens, not the engine).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpdparse.engines.base import Engine, EngineConfig, EngineInfo
from hpdparse.engines.options import EngineOptions
from hpdparse.hpd.protocol import instruction


class LocalEngine(Engine):
    """An engine with a local checkpoint; subclasses load it in start()."""

    answers_from_text_layer = True

    def __init__(
        self, config: EngineConfig, options: EngineOptions | Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(config, options)
        self._checkpoint: Any = None  # hpd.checkpoint.Checkpoint, set by open()
        self._tiling: Any = None  # hpd.tiling.TilingConfig, set by open()

    def open(self) -> None:
        if self._checkpoint is not None:
            return
        from hpdparse.hpd.checkpoint import open_checkpoint

        checkpoint = open_checkpoint(self.config.model, self.config.revision)
        self._tiling = checkpoint.config.tiling
        self._checkpoint = checkpoint

    @property
    def checkpoint(self) -> Any:
        """The resolved checkpoint (opened on first use)."""
        self.open()
        return self._checkpoint

    @property
    def tiling(self) -> Any:
        """The checkpoint's HPD tiling (opened on first use)."""
        self.open()
        return self._tiling

    @property
    def info(self) -> EngineInfo:
        return EngineInfo(
            engine=self.name,
            model=self.config.model,
            revision=self.checkpoint.revision,
            prompt=instruction(self.config.fork),
            max_tokens=self.config.max_tokens,
        )

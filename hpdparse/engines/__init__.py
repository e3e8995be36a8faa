"""Engines run the HPD model on page images: vllm (default), torch, openai.

Which engines exist, what each needs and how to make one: `hpdparse.engines.registry`."""

from hpdparse.engines.base import Engine, EngineConfig, EngineInfo, PageRequest, PageResult
from hpdparse.engines.options import EngineOptions
from hpdparse.engines.registry import DEFAULT_ENGINE, ENGINE_NAMES, create_engine

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINE_NAMES",
    "Engine",
    "EngineConfig",
    "EngineInfo",
    "EngineOptions",
    "PageRequest",
    "PageResult",
    "create_engine",
]

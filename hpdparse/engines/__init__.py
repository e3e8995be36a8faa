"""Engines run the HPD model on page images: vllm (default), torch, openai."""

from hpdparse.engines.base import Engine, EngineConfig, EngineInfo, PageRequest, PageResult

ENGINE_NAMES = ("vllm", "torch", "openai")

__all__ = [
    "ENGINE_NAMES",
    "Engine",
    "EngineConfig",
    "EngineInfo",
    "PageRequest",
    "PageResult",
    "create_engine",
]


def create_engine(name: str, config: EngineConfig) -> Engine:
    """Build the engine called `name`. Heavy dependencies are imported only here."""
    if name == "openai":
        from hpdparse.engines.openai.engine import OpenAIEngine

        return OpenAIEngine(config)
    if name == "torch":
        from hpdparse.engines.torch.engine import TorchEngine

        return TorchEngine(config)
    if name == "vllm":
        from hpdparse.engines.vllm.engine import VllmEngine

        return VllmEngine(config)
    raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINE_NAMES)}")

"""The engine registry: which engines exist, what each needs, and how to make one.

Everything that names engines reads this: the command line's ``--engine`` choices and help, the
Python API, ``hpdparse serve`` (the engines that take a live source) and the one-line errors
for a missing dependency. An engine lives in its own folder (``engines/<name>/``, with an
``engine.py`` and an ``options.py``); adding one is that folder plus one `EngineEntry` below.
The engine module is imported only when an engine is made, so listing engines (``--help``)
imports neither torch nor vLLM.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpdparse.engines.base import Engine, EngineConfig
from hpdparse.engines.openai.options import OpenAIOptions
from hpdparse.engines.options import EngineOptions
from hpdparse.engines.torch.options import TorchOptions
from hpdparse.engines.vllm.options import VllmOptions
from hpdparse.errors import EngineError


@dataclass(frozen=True)
class EngineEntry:
    """One engine: its name, how to make it and what it needs."""

    name: str
    description: str  # one line, for --help
    factory: str  # "module:Class" of the Engine subclass, imported when an engine is made
    options: type[EngineOptions]
    requires: str | None = None  # the third-party module it cannot run without
    requirement: str = ""  # that dependency in words, for the error
    install: str = "pip install hpdparse"  # how to get it
    live_source: bool = False  # Engine.run takes a source that yields None ("no request now")

    def engine_class(self) -> type[Engine]:
        """The Engine subclass (imports its module; ImportError when a dependency is missing)."""
        module, _, attribute = self.factory.partition(":")
        cls = getattr(importlib.import_module(module), attribute)
        if not (isinstance(cls, type) and issubclass(cls, Engine)):
            raise TypeError(f"{self.factory} is not an Engine subclass")
        return cls

    def available(self) -> bool:
        """Whether the third-party module it needs can be imported (without importing it)."""
        return self.requires is None or importable(self.requires)


def importable(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


ENGINES: dict[str, EngineEntry] = {
    entry.name: entry
    for entry in (
        EngineEntry(
            name="vllm",
            description="in-process vLLM",
            factory="hpdparse.engines.vllm.engine:VllmEngine",
            options=VllmOptions,
            requires="vllm",
            requirement="vLLM",
            install="pip install 'hpdparse[vllm]'",
            live_source=True,
        ),
        EngineEntry(
            name="torch",
            description="plain PyTorch",
            factory="hpdparse.engines.torch.engine:TorchEngine",
            options=TorchOptions,
            requires="torch",
            requirement="PyTorch",
            install="pip install 'hpdparse[torch]'",
            live_source=True,
        ),
        EngineEntry(
            name="openai",
            description="an OpenAI-compatible HPD server (--server)",
            factory="hpdparse.engines.openai.engine:OpenAIEngine",
            options=OpenAIOptions,
        ),
    )
}
ENGINE_NAMES = tuple(ENGINES)
DEFAULT_ENGINE = "vllm"
LIVE_ENGINE_NAMES = tuple(name for name, entry in ENGINES.items() if entry.live_source)


def get_entry(name: str) -> EngineEntry:
    """The entry of engine `name`; a one-line EngineError for an unknown name."""
    try:
        return ENGINES[name]
    except KeyError:
        raise EngineError(
            f"unknown engine {name!r}; choose one of {', '.join(ENGINE_NAMES)}"
        ) from None


def create_engine(
    name: str,
    config: EngineConfig,
    options: EngineOptions | Mapping[str, Any] | None = None,
    **settings: Any,
) -> Engine:
    """Make engine `name` (not started). `options` are its ``--engine-option`` pairs (checked
    against its options class) or an instance of that class; `settings` are values from flags
    that some engines' options have (``server=`` for openai) and the others ignore. A missing
    dependency, an unknown option or a wrong value is a one-line EngineError."""
    entry = get_entry(name)
    if not entry.available():
        raise dependency_error(name, ModuleNotFoundError(name=entry.requires))
    if options is None or isinstance(options, Mapping):
        options = entry.options.from_mapping(options, **settings)
    try:
        cls = entry.engine_class()
    except ImportError as exc:
        raise dependency_error(name, exc) from None
    return cls(config, options)


def dependency_error(engine_name: str, exc: ImportError) -> EngineError:
    """The one-line error for an engine whose dependency cannot be imported."""
    module = exc.name or ""
    if module.startswith("hpdparse."):
        return EngineError(
            f"--engine {engine_name} is not available in this version of hpdparse "
            f"(use --engine openai with an HPD server)"
        )
    entry = ENGINES.get(engine_name)
    if entry is not None and entry.requirement:
        what, how = entry.requirement, entry.install
    else:
        what, how = module or "a dependency", "pip install hpdparse"
    missing = f" (cannot import {module})" if module else f" ({' '.join(str(exc).split())})"
    return EngineError(f"--engine {engine_name} needs {what}: {how}{missing}")


def engines_help() -> str:
    """``vllm: in-process vLLM; torch: ...`` for ``--engine``'s help."""
    return "; ".join(f"{e.name}: {e.description}" for e in ENGINES.values()) + "."


def options_help() -> str:
    """What each engine's ``--engine-option`` takes, for its help."""
    parts = [f"{e.name}: {e.options.help()}" for e in ENGINES.values() if e.options.help()]
    return "; ".join(parts) + "."

"""Options of the torch engine (``--engine-option KEY=VALUE``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from hpdparse.engines.options import EngineOptions
from hpdparse.settings import setting


@dataclass
class TorchOptions(EngineOptions):
    """The torch engine's options."""

    engine: ClassVar[str] = "torch"

    schedule: Literal["concurrent", "serial"] = setting(
        "concurrent",
        "one branch per page at a time; the same text",
        example="schedule=serial",
    )

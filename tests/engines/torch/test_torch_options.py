"""The torch engine's options (`--engine-option`)."""

from __future__ import annotations

import pytest

from hpdparse.engines.torch.options import TorchOptions
from hpdparse.errors import EngineError


def test_schedule_is_concurrent_unless_told_serial() -> None:
    assert TorchOptions().schedule == "concurrent"
    assert TorchOptions.from_mapping({"schedule": "serial"}).schedule == "serial"


@pytest.mark.parametrize("value", ["parallel", 1, None])
def test_an_unknown_schedule_is_one_line(value: object) -> None:
    with pytest.raises(EngineError) as caught:
        TorchOptions.from_mapping({"schedule": value})
    assert str(caught.value) == (
        f"torch engine: schedule must be one of concurrent, serial, got {value!r}"
    )


def test_unknown_options_are_named() -> None:
    with pytest.raises(EngineError) as caught:
        TorchOptions.from_mapping({"schedul": "serial", "max_waiting": 3})
    assert str(caught.value) == (
        "torch engine: unknown engine options max_waiting, schedul; it takes schedule"
    )

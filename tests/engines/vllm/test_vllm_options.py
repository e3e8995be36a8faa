"""The vllm engine's options (`--engine-option`): checked before vLLM is imported."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpdparse.commands.main import main
from hpdparse.engines.vllm.options import VllmOptions
from hpdparse.errors import EngineError
from tests.helpers.paths import SAMPLES


def test_defaults() -> None:
    options = VllmOptions()
    assert (options.max_waiting, options.max_waiting_tokens) == (None, None)
    assert (options.kv_cache_gib, options.engine_args) == (2.0, {})


def test_other_keys_are_passed_to_vllm_unchanged() -> None:
    options = VllmOptions.from_mapping(
        {"max_waiting": None, "kv_cache_gib": 1, "max_num_seqs": 8, "enforce_eager": "yes"}
    )
    assert options.max_waiting is None
    assert options.kv_cache_gib == 1.0 and isinstance(options.kv_cache_gib, float)
    assert options.engine_args == {"max_num_seqs": 8, "enforce_eager": "yes"}


def test_what_it_takes_is_said_in_the_unknown_option_error() -> None:
    # The names of EngineArgs are checked at start (test_vllm_engine.py), with this text.
    assert VllmOptions.takes() == (
        "vLLM EngineArgs fields, engine_core, kv_cache_gib, logprobs, max_waiting"
        " and max_waiting_tokens"
    )


def test_engine_core_is_inline_or_process() -> None:
    assert VllmOptions().engine_core == "inline"
    assert VllmOptions.from_mapping({"engine_core": "process"}).engine_core == "process"
    with pytest.raises(EngineError) as caught:
        VllmOptions.from_mapping({"engine_core": "thread"})
    assert "engine_core" in str(caught.value) and "inline, process" in str(caught.value)


@pytest.mark.parametrize("name", ["max_waiting", "max_waiting_tokens"])
@pytest.mark.parametrize("value", [0, -3, 2.5, "8", True])
def test_max_waiting_must_be_a_positive_integer(name: str, value: object) -> None:
    with pytest.raises(EngineError) as caught:
        VllmOptions.from_mapping({name: value})
    assert str(caught.value) == (
        f"vllm engine: {name} must be a positive integer or None, got {value!r}"
    )


@pytest.mark.parametrize("value", [0, -1, "big", None, [1]])
def test_kv_cache_gib_must_be_a_positive_number(value: object) -> None:
    with pytest.raises(EngineError, match="vllm engine: kv_cache_gib must be a positive number"):
        VllmOptions(kv_cache_gib=value)  # type: ignore[arg-type]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed")
def test_a_wrong_value_on_the_command_line_is_one_line_before_loading(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["convert", str(SAMPLES / "memo.pdf"), "-o", str(tmp_path), "--engine", "vllm"]
        + ["--engine-option", "max_waiting=0"],
    )
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: vllm engine: max_waiting must be a positive integer or None, got 0"
    ]
    assert not any(tmp_path.iterdir())

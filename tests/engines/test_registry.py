"""The engine registry: one entry per engine, read by the command line, the API and serve."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpdparse import api
from hpdparse.commands.main import main
from hpdparse.engines import registry
from hpdparse.engines.base import Engine, EngineConfig
from hpdparse.engines.openai.options import OpenAIOptions
from hpdparse.engines.registry import (
    DEFAULT_ENGINE,
    ENGINE_NAMES,
    ENGINES,
    LIVE_ENGINE_NAMES,
    EngineEntry,
    create_engine,
    get_entry,
)
from hpdparse.errors import EngineError
from hpdparse.serve.server import HpdServer
from hpdparse.serve.settings import ServeSettings
from hpdparse.settings import declaration
from tests.helpers.paths import SAMPLES


def test_every_entry_makes_its_engine_with_its_options_class() -> None:
    assert ENGINE_NAMES == ("vllm", "torch", "openai") and DEFAULT_ENGINE == "vllm"
    for name, entry in ENGINES.items():
        cls = entry.engine_class()
        assert issubclass(cls, Engine) and cls.name == name
        assert cls.options_class is entry.options and entry.options.engine == name
        assert entry.description and "\n" not in entry.description
        if entry.available():
            engine = create_engine(name, EngineConfig())
            assert type(engine) is cls and type(engine.options) is entry.options


def test_live_engines_are_the_in_process_ones() -> None:
    assert LIVE_ENGINE_NAMES == ("vllm", "torch")
    assert DEFAULT_ENGINE in LIVE_ENGINE_NAMES  # serve's default


def test_cli_choices_and_help_come_from_the_registry() -> None:
    convert = CliRunner().invoke(main, ["convert", "--help"], terminal_width=200).output
    assert "--engine [vllm|torch|openai]" in convert
    text = " ".join(convert.split())
    for entry in ENGINES.values():
        assert f"{entry.name}: {entry.description}" in text
        for key in entry.options.settable():
            field = next(f for f in dataclasses.fields(entry.options) if f.name == key)
            if declaration(field).example:
                assert declaration(field).example in text, key
    serve = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200).output
    assert "--engine [vllm|torch]" in serve


def test_serve_refuses_an_engine_without_live_sources() -> None:
    server = HpdServer("openai", EngineConfig(), ServeSettings(port=0))
    with pytest.raises(EngineError, match="--engine openai cannot serve"):
        server.start()
    result = CliRunner().invoke(main, ["serve", "--engine", "openai"])
    assert result.exit_code == 2 and "'openai' is not one of" in result.output


def test_unknown_engine_is_one_line() -> None:
    with pytest.raises(EngineError) as caught:
        get_entry("sglang")
    assert str(caught.value) == "unknown engine 'sglang'; choose one of vllm, torch, openai"
    with pytest.raises(EngineError, match="unknown engine 'sglang'"):
        api.convert([SAMPLES / "memo.pdf"], engine="sglang")


@pytest.mark.parametrize(
    ("engine", "needs"),
    [
        ("vllm", "vLLM: pip install 'hpdparse[vllm]'"),
        ("torch", "PyTorch: pip install 'hpdparse[torch]'"),
    ],
)
def test_a_missing_dependency_is_one_line_before_anything_loads(
    monkeypatch: pytest.MonkeyPatch, engine: str, needs: str
) -> None:
    monkeypatch.setitem(sys.modules, engine, None)  # what Python does for a module it cannot find
    with pytest.raises(EngineError) as caught:
        create_engine(engine, EngineConfig())
    assert str(caught.value) == f"--engine {engine} needs {needs} (cannot import {engine})"


def test_an_engine_is_one_entry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A new engine needs its folder and one entry: the name, the dependency error and the
    options check follow from the entry."""
    entry = EngineEntry(
        name="sglang",
        description="in-process SGLang",
        factory="hpdparse.engines.openai.engine:OpenAIEngine",  # any Engine: not imported here
        options=OpenAIOptions,
        requires="no_sglang_here",
        requirement="SGLang",
        install="pip install sglang",
    )
    monkeypatch.setitem(ENGINES, "sglang", entry)
    with pytest.raises(EngineError) as caught:
        create_engine("sglang", EngineConfig())
    assert str(caught.value) == (
        "--engine sglang needs SGLang: pip install sglang (cannot import no_sglang_here)"
    )
    monkeypatch.setitem(ENGINES, "sglang", dataclasses.replace(entry, requires=None))
    with pytest.raises(EngineError, match="unknown engine option max_waiting"):
        create_engine("sglang", EngineConfig(), {"max_waiting": 1})


def test_a_factory_that_is_not_an_engine_is_refused() -> None:
    entry = dataclasses.replace(ENGINES["openai"], factory="hpdparse.errors:EngineError")
    with pytest.raises(TypeError, match="not an Engine subclass"):
        entry.engine_class()


def test_options_of_another_engine_are_refused() -> None:
    from hpdparse.engines.torch.options import TorchOptions

    with pytest.raises(EngineError, match="openai engine: options of the torch engine"):
        create_engine("openai", EngineConfig(), TorchOptions())


def test_flag_settings_reach_only_the_engines_that_have_them() -> None:
    openai = create_engine("openai", EngineConfig(), {}, server="http://gpu-box:8118/v1/")
    assert openai.options.server == "http://gpu-box:8118/v1/" and openai.server.endswith("/v1")
    if registry.ENGINES["torch"].available():
        torch = create_engine("torch", EngineConfig(), {}, server="http://gpu-box:8118/v1")
        assert not hasattr(torch.options, "server")

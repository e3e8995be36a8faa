"""Options declared once (hpdparse/settings.py): every declared flag is an option of the commands
with the declared default, the Python API takes the same names, and the --text-layer mode is one
type that JSON and the command line write as its bare word."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
import pytest

from hpdparse import api
from hpdparse.commands.main import convert, render
from hpdparse.commands.serve import serve_command
from hpdparse.engines.openai.options import OpenAIOptions
from hpdparse.engines.options import EngineConfig
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.ray.settings import RaySettings
from hpdparse.runner.settings import ConvertSettings, ReportSettings
from hpdparse.settings import TextLayerMode, declaration, share_out
from hpdparse.sources.page_ranges import parse_page_ranges

DECLARING = (
    ConvertSettings,
    RenderOptions,
    EngineConfig,
    ReportSettings,
    RaySettings,
    OpenAIOptions,
)


def _flagged(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if declaration(f).flag]


def _options(command: click.Command) -> dict[str, click.Option]:
    return {o: p for p in command.params if isinstance(p, click.Option) for o in p.opts}


@pytest.mark.parametrize("cls", DECLARING, ids=lambda c: c.__name__)
def test_every_declared_flag_is_a_convert_option_with_the_declared_default(cls: type) -> None:
    options = _options(convert)
    for field in _flagged(cls):
        declared = declaration(field)
        option = options[declared.flag.split("/")[0]]
        assert option.name == field.name
        assert option.help == declared.help
        if declared.parse is not None:  # read from text: no default of its own
            assert declared.parse(option.default) == field.default
        elif declared.negate:
            assert option.default is not field.default
        else:
            assert option.default == field.default


def test_serve_and_render_take_the_same_declarations() -> None:
    serve, render_options = _options(serve_command), _options(render)
    for field in _flagged(EngineConfig):
        assert serve[declaration(field).flag].name == field.name
    for field in _flagged(RenderOptions):
        assert render_options[declaration(field).flag].name == field.name
    assert render_options["--layout"].name == "layout"


def test_the_python_api_takes_the_declared_names_and_no_others(tmp_path: Path) -> None:
    run, config, report = share_out(
        {"dpi": 72, "fork": False, "fail_below": 0.2}, ConvertSettings, EngineConfig, ReportSettings
    )
    assert (run, config, report) == ({"dpi": 72}, {"fork": False}, {"fail_below": 0.2})
    with pytest.raises(TypeError, match="'no_fork'"):
        api.convert([], tmp_path, engine="openai", no_fork=True)


def test_pages_are_parsed_once_declared() -> None:
    assert ConvertSettings(".", pages="2-3,7-").pages == parse_page_ranges("2-3,7-")
    assert ConvertSettings(".").pages.is_all
    with pytest.raises(ValueError, match="empty page range"):
        ConvertSettings(".", pages="")


def test_text_layer_mode_is_one_type_written_as_its_word() -> None:
    options = RenderOptions(text_layer="prefer")
    assert options.text_layer is TextLayerMode.PREFER
    assert json.dumps({"text_layer": options.text_layer}) == '{"text_layer": "prefer"}'
    assert RenderOptions().text_layer is TextLayerMode.VERIFY
    with pytest.raises(ValueError):
        RenderOptions(text_layer="sometimes")

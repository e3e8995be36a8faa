"""The openai engine's options: `--engine-option` keys, and the settings from flags or Python."""

from __future__ import annotations

import pytest

from hpdparse.engines.base import EngineConfig
from hpdparse.engines.openai.engine import OpenAIEngine
from hpdparse.engines.openai.options import DEFAULT_SERVER, OpenAIOptions
from hpdparse.errors import EngineError


def test_defaults() -> None:
    options = OpenAIOptions()
    assert options.server == DEFAULT_SERVER == "http://127.0.0.1:8118/v1"
    assert (options.request_timeout, options.retries) == (600.0, 3)
    assert (options.retry_backoff, options.retry_backoff_max) == (0.5, 20.0)
    assert options.api_key is None and options.extra_body == {}


def test_engine_option_keys_are_the_four_of_before_and_logprobs() -> None:
    assert OpenAIOptions.settable() == (
        "api_key",
        "extra_body",
        "logprobs",
        "retry_backoff",
        "retry_backoff_max",
    )
    for key in ("server", "request_timeout", "retries"):
        with pytest.raises(EngineError, match=f"unknown engine option {key}; it takes api_key,"):
            OpenAIOptions.from_mapping({key: 1})
    assert OpenAIOptions.from_mapping({}, server="http://h/v1", retries=0).server == "http://h/v1"


def test_values_are_read_as_the_command_line_gives_them() -> None:
    # VALUE is JSON when it parses: a numeric key is a number, null an empty body.
    options = OpenAIOptions.from_mapping(
        {"api_key": 123, "extra_body": None, "retry_backoff": 1, "retry_backoff_max": 2}
    )
    assert options.api_key == "123" and options.extra_body == {}
    assert (options.retry_backoff, options.retry_backoff_max) == (1.0, 2.0)
    body = {"skip_special_tokens": False}
    assert OpenAIOptions.from_mapping({"extra_body": body}).extra_body == body


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"extra_body": "x"}, "extra_body must be a JSON object, got 'x'"),
        ({"extra_body": [1]}, "extra_body must be a JSON object, got [1]"),
        ({"retry_backoff": -1}, "retry_backoff must be a non-negative number, got -1"),
        ({"retry_backoff_max": "x"}, "retry_backoff_max must be a non-negative number, got 'x'"),
        ({"api_key": ["k"]}, "api_key must be text or None, got ['k']"),
    ],
)
def test_a_wrong_value_is_one_line(values: dict, message: str) -> None:
    with pytest.raises(EngineError) as caught:
        OpenAIOptions.from_mapping(values)
    assert str(caught.value) == f"openai engine: {message}"


@pytest.mark.parametrize(("field", "value"), [("request_timeout", 0), ("retries", -1)])
def test_python_settings_are_checked_too(field: str, value: object) -> None:
    with pytest.raises(EngineError, match=f"openai engine: {field} must be"):
        OpenAIOptions(**{field: value})


def test_open_contacts_no_server_and_info_is_the_model_asked_for() -> None:
    engine = OpenAIEngine(EngineConfig(model="mine"), OpenAIOptions(server="http://127.0.0.1:9/v1"))
    engine.open()  # nothing listens on port 9: open() must not need the server
    assert (engine.info.model, engine.info.revision) == ("mine", None)

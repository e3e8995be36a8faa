"""What of the GPU check (benchmarks/gpu/) and the real-size instrument runs without a GPU.

The wheelhouse's parts join back to the same bytes and a damaged or missing part is refused; the
vLLM wheel's slimming drops exactly the members it names (RECORD too); a reduced instrument
(real widths, 1 vision and 2 decoder layers) makes the torch engine write its expected page, in
fork mode with P-MTP and in plain mode.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

BENCHMARKS = REPO / "benchmarks"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[path.stem] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


wheelhouse = _load(BENCHMARKS / "gpu" / "wheelhouse.py")


def _wheels(folder: Path) -> dict[str, bytes]:
    folder.mkdir()
    contents = {f"pkg{i}-1.0-py3-none-any.whl": os.urandom(70_000 + 9_000 * i) for i in range(4)}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    return contents


def _receive(parts: Path, store: Path) -> Path:
    """What check.sh receive does: every part folder's files into one flat folder."""
    store.mkdir()
    for folder in sorted(parts.glob("part-*")):
        for file in folder.iterdir():
            shutil.copy2(file, store / file.name)
    return store


def test_parts_join_to_the_same_bytes(tmp_path: Path) -> None:
    contents = _wheels(tmp_path / "wheels")
    manifest = wheelhouse.pack(tmp_path / "wheels", tmp_path / "parts", part_bytes=100_000)
    assert len(manifest["parts"]) >= 3
    assert all(p["size"] <= 100_000 for p in manifest["parts"])
    joined = wheelhouse.join(_receive(tmp_path / "parts", tmp_path / "store"), tmp_path / "out")
    assert {p.name: p.read_bytes() for p in joined} == contents


def test_a_damaged_or_missing_part_is_refused(tmp_path: Path) -> None:
    _wheels(tmp_path / "wheels")
    wheelhouse.pack(tmp_path / "wheels", tmp_path / "parts", part_bytes=100_000)
    store = _receive(tmp_path / "parts", tmp_path / "store")
    part = store / "part-01"
    data = bytearray(part.read_bytes())
    data[10] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(SystemExit, match="part-01 is damaged"):
        wheelhouse.join(store, tmp_path / "out")
    part.unlink()
    with pytest.raises(SystemExit, match="part-01 missing"):
        wheelhouse.join(store, tmp_path / "out2")


def test_slimming_drops_only_the_named_members(tmp_path: Path) -> None:
    wheel = tmp_path / "vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    kept = ["vllm/__init__.py", "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so", "vllm/_C.abi3.so"]
    kept += ["vllm/third_party/pynvml.py"]
    dropped = ["vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/_moe_C_stable_libtorch.abi3.so"]
    dropped += ["vllm/vllm-rs", "vllm/third_party/deep_gemm/include/cute/arch/mma.hpp"]
    record = "".join(f"{name},sha256=x,1\n" for name in kept + dropped)
    with zipfile.ZipFile(wheel, "w") as z:
        for name in kept + dropped:
            z.writestr(name, b"x" * 1000)
        z.writestr("vllm-0.26.0.dist-info/RECORD", record)
    wheelhouse.slim_wheel(wheel)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        lines = z.read("vllm-0.26.0.dist-info/RECORD").decode().splitlines()
    assert names == {*kept, "vllm-0.26.0.dist-info/RECORD"}
    assert [line.split(",")[0] for line in lines] == kept


@pytest.mark.torch
def test_the_reduced_instrument_writes_its_page(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import numpy as np
    from PIL import Image

    from hpdparse.engines import create_engine
    from hpdparse.engines.base import EngineConfig, PageRequest

    instrument = _load(BENCHMARKS / "instrument.py")  # puts benchmarks/ on sys.path
    spec = instrument.Spec(blocks=3, tokens_per_page=48, pmtp_rate=0.5, reduced=True)
    model = instrument.write_instrument(tmp_path / "instrument", spec)
    config = json.loads((model / "config.json").read_text())
    assert config["llm_config"]["hidden_size"] == 1024 and config["fork_token_id"] == 4094
    expected = (model / "expected.txt").read_text(encoding="utf-8")
    assert expected.count("<BLOCK>") == 3 and expected.count("<CHILD>") == 3
    page = Image.fromarray(np.random.default_rng(0).integers(0, 256, (448, 448, 3), np.uint8))
    os.environ.setdefault("HPDPARSE_CACHE", str(tmp_path / "cache"))
    for fork, mtp in ((True, True), (False, False)):
        cfg = EngineConfig(model=str(model), fork=fork, mtp=mtp, device="cpu", max_tokens=200)
        with create_engine("torch", cfg) as engine:
            (result,) = engine.run([PageRequest(0, engine.preparer()(page))], 1)
        assert result.text == expected, (fork, mtp)
        assert result.stats["forks"] == (3 if fork else 0)
        if mtp:  # right drafts cut the steps; wrong ones (half the tokens) are rejected
            assert 0 < result.stats["accepted_tokens"] < result.stats["drafted_tokens"]

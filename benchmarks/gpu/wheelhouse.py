"""The GPU check's wheelhouse: the wheels the H200 machine lacks, slimmed and cut into parts that
fit its 64 MiB-per-call transfers, and joined again there.

    python benchmarks/gpu/wheelhouse.py build [--out .gpu] [--part-mib 54]   # here
    python3 benchmarks/gpu/wheelhouse.py join PARTS_DIR WHEEL_DIR            # on the machine

build downloads benchmarks/gpu/requirements-h200.txt for CPython 3.12 on manylinux x86_64 (no
dependencies resolved: the list is complete), drops from the vLLM wheel what an in-process
engine on a Hopper GPU never loads (the FlashAttention-2 kernels, Hopper runs FA3; the MoE
kernels, the model is dense; the Rust front end; C++ headers for JIT builds), packs everything
into one tar, and cuts it into OUT/part-NN/ folders, each holding one part and the manifest
(sizes and sha256 of every part and of the whole). join checks every part and the whole against
the manifest before it unpacks. Standard library only, so the machine's python3 runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements-h200.txt"
MANIFEST = "manifest.json"
# Members of the vLLM wheel an in-process engine on a Hopper GPU does not load (each import of
# them in vLLM 0.26 is guarded: vllm_flash_attn/flash_attn_interface.py, platforms/cuda.py).
DROPPED_PREFIXES = (
    "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
    "vllm/_moe_C_stable_libtorch.abi3.so",
    "vllm/vllm-rs",
)
DROPPED_HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl")
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 40)] + ["manylinux2014_x86_64"]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(requirements: Path, dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    cmd += ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run([*cmd, "-d", str(dest), "-r", str(requirements)], check=True)


def _dropped(name: str) -> bool:
    if name.startswith(DROPPED_PREFIXES):
        return True
    return name.startswith("vllm/third_party/") and name.endswith(DROPPED_HEADER_SUFFIXES)


def slim_wheel(wheel: Path) -> tuple[int, int]:
    """Rewrite `wheel` without the dropped members (RECORD updated); (bytes before, after)."""
    before = wheel.stat().st_size
    slim = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(slim, "w") as dst:
        for info in src.infolist():
            if _dropped(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(ln for ln in lines if not _dropped(ln.split(",", 1)[0])).encode()
            dst.writestr(info, data)
    os.replace(slim, wheel)
    return before, wheel.stat().st_size


def pack(wheels: Path, out: Path, part_bytes: int) -> dict:
    """tar the wheels, cut it into out/part-NN/part-NN (+ the manifest in each folder)."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "wheels.tar"
        with tarfile.open(archive, "w") as tar:
            for wheel in sorted(wheels.glob("*.whl")):
                tar.add(wheel, arcname=wheel.name)
        manifest: dict = {"sha256": sha256(archive), "size": archive.stat().st_size, "parts": []}
        with open(archive, "rb") as f:
            for index, block in enumerate(iter(lambda: f.read(part_bytes), b"")):
                name = f"part-{index:02d}"
                folder = out / name
                folder.mkdir(exist_ok=True)
                (folder / name).write_bytes(block)
                digest = hashlib.sha256(block).hexdigest()
                manifest["parts"].append({"name": name, "size": len(block), "sha256": digest})
    for part in manifest["parts"]:
        (out / part["name"] / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def join(parts: Path, wheels: Path) -> list[Path]:
    """Check and join the parts in `parts` (flat), unpack the wheels into `wheels`."""
    manifest = json.loads((parts / MANIFEST).read_text())
    wheels.mkdir(parents=True, exist_ok=True)
    archive = wheels / "wheels.tar"
    with open(archive, "wb") as out:
        for part in manifest["parts"]:
            path = parts / part["name"]
            if not path.is_file():
                raise SystemExit(f"wheelhouse: {part['name']} missing in {parts}")
            if sha256(path) != part["sha256"]:
                raise SystemExit(f"wheelhouse: {part['name']} is damaged (sha256 differs)")
            with open(path, "rb") as f:
                shutil.copyfileobj(f, out)
    if sha256(archive) != manifest["sha256"]:
        raise SystemExit("wheelhouse: the joined archive differs from the one packed")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        if any("/" in n or n.startswith(".") for n in names):
            raise SystemExit("wheelhouse: unexpected paths in the archive")
        tar.extractall(wheels)
    archive.unlink()
    return [wheels / n for n in names]


def build(out: Path, part_mib: int) -> None:
    with tempfile.TemporaryDirectory(prefix="wheelhouse-") as tmp:
        wheels = Path(tmp)
        download(REQUIREMENTS, wheels)
        for wheel in wheels.glob("vllm-*.whl"):
            before, after = slim_wheel(wheel)
            print(f"{wheel.name}: {before / 2**20:.0f} MiB -> {after / 2**20:.0f} MiB")
        total = sum(w.stat().st_size for w in wheels.glob("*.whl"))
        print(f"{len(list(wheels.glob('*.whl')))} wheels, {total / 2**20:.0f} MiB")
        if out.exists():
            shutil.rmtree(out)
        manifest = pack(wheels, out, part_mib * 2**20)
    sizes = ", ".join(f"{p['size'] / 2**20:.1f}" for p in manifest["parts"])
    print(f"{out}: {len(manifest['parts'])} parts ({sizes} MiB), sha256 {manifest['sha256'][:16]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download, slim, pack and cut (here)")
    b.add_argument("--out", type=Path, default=Path(".gpu"))
    b.add_argument("--part-mib", type=int, default=54)
    j = sub.add_parser("join", help="check, join and unpack (on the GPU machine)")
    j.add_argument("parts", type=Path)
    j.add_argument("wheels", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.out, args.part_mib)
    else:
        joined = join(args.parts, args.wheels)
        print(f"wheelhouse: {len(joined)} wheels in {args.wheels}")


if __name__ == "__main__":
    main()

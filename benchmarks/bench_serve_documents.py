"""Whole documents through `hpdparse serve` against the same documents through `hpdparse convert`.

    .venv/bin/python benchmarks/bench_serve_documents.py [--engine vllm|torch] [--model M]
        [--device DEV] [--documents 64] [--clients 8] [--store DIR] [--rounds 3] [--poll 0]
        [--running-documents N] [--engine-option KEY=VALUE]

--documents files (the samples repeated, each a distinct copy in a temporary folder) go through
a real server (a subprocess started once with the engine, model and device given) and through
`hpdparse convert` runs of the same engine, model and device, alternating, --rounds times each.
Service side: --clients threads share the documents; each uploads all of its share first (so
every document is in flight at once), then follows each one (its server-sent events, or with
--poll S its status every S seconds) until it ends and downloads its Markdown; pages/s are
counted from the first upload to the last download. Convert side: one `hpdparse.api.convert` of
the same folder (what the command runs), in a process of its own whose engine was loaded and
started first, as the server's is; pages/s from the call to its return (rasterizing, decoding,
finishing and writing every document). The clients run on the server's machine and take their
share of its CPUs. Prints each round, the medians, the median of the rounds' ratios
service/convert (the target is 0.9 or more at 64 documents in flight), how many documents gave
byte-identical Markdown both ways, the machine and the command line. Asserts nothing; on a
shared machine the rounds move with its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from tests.helpers.paths import SAMPLES, TINY  # noqa: E402
from tests.helpers.processes import stop_process  # noqa: E402

INPUTS = ("report.pdf", "paper.pdf", "memo.pdf", "scan.png")
START_SECONDS = 900  # a vLLM start on a busy machine
FINAL = ("done", "failed", "cancelled")


def make_documents(count: int, folder: Path) -> list[Path]:
    """`count` files: the samples in turn, each a copy of its own (doc-007-memo.pdf...)."""
    folder.mkdir(parents=True)
    paths = []
    for number in range(count):
        sample = SAMPLES / INPUTS[number % len(INPUTS)]
        path = folder / f"doc-{number:03d}-{sample.name}"
        shutil.copyfile(sample, path)
        paths.append(path)
    return paths


def engine_args(args: argparse.Namespace) -> list[str]:
    """The options both commands get: engine, model, device, engine options."""
    out = ["--engine", args.engine, "--model", args.model]
    if args.device:
        out += ["--device", args.device]
    for option in args.engine_option:
        out += ["--engine-option", option]
    return out


# ---------------------------------------------------------------------- the service
@dataclass
class Outcome:
    name: str
    status: str = ""
    pages: int = 0
    error: str | None = None
    markdown: str | None = None


@dataclass
class Clients:
    base: str
    poll: float  # seconds between a client's looks at its pending documents; 0: events
    outcomes: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, paths: list[Path]) -> None:
        """Upload every document of `paths`, then follow each until it ends and download it."""
        with httpx.Client(base_url=self.base, timeout=600) as http:
            pending = {self._upload(http, path): Outcome(path.name) for path in paths}
            while pending:
                for doc_id, outcome in list(pending.items()):
                    body = self._ended(http, doc_id)
                    if body is None:
                        continue
                    outcome.status, outcome.error = body["status"], body["error"]
                    outcome.pages = body["pages"]["done"]
                    if outcome.status == "done":
                        answer = http.get(f"/v1/documents/{doc_id}/result?format=markdown")
                        outcome.markdown = answer.raise_for_status().text
                    with self.lock:
                        self.outcomes.append(outcome)
                    del pending[doc_id]
                if pending and self.poll:
                    time.sleep(self.poll)

    def _ended(self, http: httpx.Client, doc_id: str) -> dict | None:
        """The document's status body once it has ended: polled (None while it runs), or with
        --poll 0 read from its event stream (which returns at the end)."""
        if self.poll:
            body = http.get(f"/v1/documents/{doc_id}").raise_for_status().json()
            return body if body["status"] in FINAL else None
        body = None
        with http.stream("GET", f"/v1/documents/{doc_id}/events") as events:
            for line in events.raise_for_status().iter_lines():
                if line.startswith("data: {") and line != "data: {}":
                    body = json.loads(line.removeprefix("data: "))
        return body

    @staticmethod
    def _upload(http: httpx.Client, path: Path) -> str:
        while True:
            with open(path, "rb") as data:
                answer = http.post("/v1/documents", files={"file": (path.name, data)})
            if answer.status_code == 429:  # the queue is full: as a client should
                time.sleep(float(answer.headers.get("retry-after", 1)))
                continue
            return answer.raise_for_status().json()["documents"][0]["id"]


@contextmanager
def server(args: argparse.Namespace, store: Path, log: Path):
    """`hpdparse serve` until the block ends; yields its root URL."""
    cmd = [sys.executable, "-m", "hpdparse", "serve", *engine_args(args)]
    cmd += ["--port", "0", "--store", str(store)]
    if args.running_documents:
        cmd += ["--running-documents", str(args.running_documents)]
    with open(log, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    try:
        line = lines.get(timeout=START_SECONDS)
        if not line.startswith("serving "):
            raise SystemExit(f"the server did not start: {line!r}\n{log.read_text()[-3000:]}")
        yield line.strip().rsplit(" ", 1)[1].strip("()").removesuffix("/v1")
    finally:
        stop_process(proc)


def through_service(base: str, paths: list[Path], clients: int, poll: float) -> dict:
    """One round: every document uploaded, followed and downloaded by `clients` threads."""
    followers = Clients(base, poll)
    shares = [paths[n::clients] for n in range(clients)]
    threads = [threading.Thread(target=followers.client, args=(s,)) for s in shares if s]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    pages = sum(o.pages for o in followers.outcomes)
    failed = [o for o in followers.outcomes if o.status != "done"]
    for outcome in failed[:5]:
        print(f"  service: {outcome.name} {outcome.status}: {outcome.error}")
    markdown = {o.name: o.markdown for o in followers.outcomes}
    return {
        "pps": pages / wall,
        "wall": wall,
        "pages": pages,
        "failed": len(failed),
        "md": markdown,
    }


# ---------------------------------------------------------------------- convert
CONVERT_ROUND = """
import json, sys, time
from hpdparse import api
from hpdparse.engines.options import EngineConfig
from hpdparse.engines.registry import create_engine

spec = json.loads(sys.argv[1])
engine = create_engine(spec["engine"], EngineConfig(model=spec["model"], device=spec["device"]),
                       spec["options"])
engine.open()
engine.start()
began = time.perf_counter()
report = api.convert([spec["folder"]], spec["out"], engine=engine, report_path=spec["report"])
wall = time.perf_counter() - began
engine.close()
print(json.dumps({"wall": wall}))
"""


def through_convert(args: argparse.Namespace, folder: Path, work: Path) -> dict:
    """One `hpdparse convert` of `folder` (the Python API's, which the command runs) on an engine
    started beforehand, as the server's is: timed from the call to its return, rasterizing,
    decoding, finishing and writing every document."""
    work.mkdir()
    out, report_path = work / "out", work / "run.json"
    options = dict(option.split("=", 1) for option in args.engine_option)
    spec = {
        "engine": args.engine,
        "model": args.model,
        "device": args.device,
        "options": options,
        "folder": str(folder),
        "out": str(out),
        "report": str(report_path),
    }
    cmd = [sys.executable, "-c", CONVERT_ROUND, json.dumps(spec)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if not report_path.is_file() or done.returncode != 0:
        tail = done.stderr[-3000:]
        raise SystemExit(f"convert failed (exit {done.returncode}):\n{tail}")
    wall = json.loads(done.stdout.strip().splitlines()[-1])["wall"]
    report = json.loads(report_path.read_text("utf-8"))
    markdown = {}
    for doc in report["documents"]:
        path = Path(doc["output_dir"]) / f"{Path(doc['output_dir']).name}.md"
        markdown[Path(doc["source"]).name] = path.read_text("utf-8") if path.is_file() else None
    pages = report["totals"]["pages_decoded"]
    return {
        "wall": wall,
        "pages": pages,
        "pps": pages / wall,
        "failed": len(report["documents"]) - report["totals"]["converted"],
        "md": markdown,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("vllm", "torch"), default="vllm")
    parser.add_argument("--model", default=str(TINY))
    parser.add_argument("--device", default=None, help="torch device; default: the best one")
    parser.add_argument("--documents", type=int, default=64)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--store", default=None, help="the server's --store (default: a temp one)")
    parser.add_argument(
        "--poll",
        type=float,
        default=0.0,
        help="seconds between status polls; 0 (the default): follow each document's events",
    )
    parser.add_argument("--rounds", type=int, default=3, help="service and convert, alternating")
    parser.add_argument("--running-documents", type=int, default=None, help="default: serve's")
    parser.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU cores, {platform.platform()}")
    services, converts, ratios, same = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-serve-documents-") as tmp:
        work = Path(tmp)
        paths = make_documents(args.documents, work / "documents")
        store = Path(args.store) if args.store else work / "store"
        began = time.perf_counter()
        with server(args, store, work / "serve.log") as base:
            print(f"server up in {time.perf_counter() - began:.1f} s")
            for number in range(args.rounds):
                service = through_service(base, paths, args.clients, args.poll)
                convert = through_convert(args, work / "documents", work / f"convert-{number}")
                services.append(service["pps"])
                converts.append(convert["pps"])
                same.append(
                    sum(1 for n, md in service["md"].items() if md and md == convert["md"].get(n))
                )
                ratios.append(service["pps"] / convert["pps"] if convert["pps"] else float("nan"))
                print(
                    f"round {number + 1}: ratio {ratios[-1]:.2f}; service "
                    f"{service['pages']} pages in {service['wall']:.1f} s = "
                    f"{service['pps']:.2f} pages/s "
                    f"({service['failed']} not done); convert {convert['pages']} pages in "
                    f"{convert['wall']:.1f} s = {convert['pps']:.2f} pages/s "
                    f"({convert['failed']} not converted)"
                )
    service_pps, convert_pps = statistics.median(services), statistics.median(converts)
    print(f"Markdown identical both ways: {min(same)} of {len(paths)} documents in every round")
    print(
        f"median of {args.rounds}: service {service_pps:.2f} pages/s ({args.clients} clients), "
        f"convert {convert_pps:.2f} pages/s"
    )
    print(
        f"ratio service/convert at {len(paths)} documents in flight, median of the rounds': "
        f"{statistics.median(ratios):.2f} (target 0.9)"
    )


if __name__ == "__main__":
    main()

"""Output to a bucket against output to a local folder: pages/s and the requests each page costs.

Usage: .venv/bin/python benchmarks/bench_storage.py [--docs 3] [--pages 20] [--dpi 100]
                                                    [--rounds 2] [--workers 0] [--latency 0]
                                                    [--code DIR]

Generated text PDFs (--docs of --pages pages each, local files) go through `hpdparse convert
--engine openai` against the fake HPD server (tests/helpers/fakeserver.py, so that the model is
not the bottleneck), once into a local folder and once into a bucket of a real S3 server (moto's
server mode on 127.0.0.1, tests/helpers/s3server.py), alternately, --rounds times each, a fresh
output each time. pages/s is pages decoded over the run's whole time (its report's "seconds").
The bucket's requests are counted at the server, from its access log: LIST, GET, HEAD, PUT and
DELETE (a batched delete counts once) per page, the report's own PUT excluded (it goes to a local
file), and the PUTs by object: a page's raw/ objects and figure images, the document's own.
`--latency MS` puts a forwarder in front of the server that answers each request MS later (a
store across a network, where requests wait rather than compute); `--code DIR` runs the
hpdparse checkout in DIR instead of this one (two versions compared under the same servers).
Goal: bucket >= 0.9x local pages/s, <= 3 PUTs per page. The last line reads
`bucket/local pages/s: R; PUTs per page: P`.

What R is made of (printed before it, added after the first figures, which had only R): the CPU
time of hpdparse's process per page (the convert process, where the S3 client runs, from
`getrusage`, its imports and setup included; not its rasterizer processes, which multiprocessing's
forkserver starts and reaps, and which do the same work for both outputs), local and bucket, their
ratio as "bucket/local pages per CPU-second", the S3 server's own CPU per page (moto's process,
from /proc; "n/a" elsewhere) and the TCP connections per request (counted at the forwarder). All of
them run on this machine's cores, so on a small machine R is mostly a ratio of CPU: moto's server
answers every request with "Connection: close" (werkzeug's development server), so each request
costs a new connection in hpdparse's S3 client, in the forwarder and in moto, which a store that
keeps connections open (S3, MinIO, GCS) does not cost. pages/s is still each run's own report
("seconds": from the run's start, after the command's imports, to its end) for both outputs, so the
bucket's one-off costs inside the run (the S3 client's session, made at the first request) are in
it; more pages per run (--docs, --pages) spread them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import pymupdf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.fakeserver import FakeHPDServer  # noqa: E402
from tests.helpers.s3server import Gate, MotoServer  # noqa: E402

KINDS = ("LIST", "GET", "HEAD", "PUT", "DELETE")


def generated_pdf(path: Path, pages: int, seed: int) -> Path:
    doc = pymupdf.open()
    words = "object storage keeps every page as its own object written in one request " * 10
    for n in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 60), f"Document {seed}, page {n} of {pages}", fontsize=16)
        page.insert_textbox(pymupdf.Rect(72, 90, 523, 770), words[n:], fontsize=10)
    doc.save(path)
    doc.close()
    return path


def put_kinds(log: list[tuple[str, str]]) -> tuple[Counter[str], set[str]]:
    """The PUTs of a run by object: "raw" (a page's raw/ objects), "images" (figure crops) and
    "document" (the document's own objects, whose names, the stem written <stem>, come second)."""
    kinds: Counter[str] = Counter()
    names: set[str] = set()
    for kind, path in log:
        if kind != "PUT":
            continue
        if "/raw/page-" in path:
            kinds["raw"] += 1
        elif "/images/" in path:
            kinds["images"] += 1
        else:
            kinds["document"] += 1
            stem, name = path.split("/", 3)[-1].split("/", 1)  # /bucket/outN/<stem>/<name>
            names.add(name.replace(stem, "<stem>", 1))
    return kinds, names


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) of a running process, or None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def convert(
    inputs: list[Path], out: str, server: FakeHPDServer, args, report: Path
) -> tuple[dict, float]:
    """Run `hpdparse convert`; its report and the CPU seconds of its process (not of its
    rasterizer processes: the forkserver, not this process, reaps them)."""
    cmd = [sys.executable, "-m", "hpdparse", "convert", *map(str, inputs), "-o", out]
    cmd += ["--engine", "openai", "--server", server.url, "--dpi", str(args.dpi), "--quiet"]
    cmd += ["--workers", str(args.workers), "--report", str(report)]
    code = args.code or str(REPO)
    env = {**os.environ, "PYTHONPATH": code, "OMP_NUM_THREADS": "1"}
    cpu = children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=code, env=env, check=False)
    cpu = children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"convert failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(report.read_text()), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=3)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--dpi", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="ms added to each answer")
    parser.add_argument("--code", default=None, help="the hpdparse checkout to run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp_name, FakeHPDServer() as fake:
        tmp = Path(tmp_name)
        inputs = [generated_pdf(tmp / f"doc{i}.pdf", args.pages, i) for i in range(args.docs)]
        moto = MotoServer(tmp / "access.log")
        gate = Gate(moto.port, delay=args.latency / 1000)
        try:
            os.environ.update(
                AWS_ENDPOINT_URL=gate.url,
                AWS_ACCESS_KEY_ID="bench-key",
                AWS_SECRET_ACCESS_KEY="bench-secret",
                AWS_DEFAULT_REGION="us-east-1",
                AWS_EC2_METADATA_DISABLED="true",
            )
            import boto3

            bucket = f"bench-{uuid.uuid4().hex[:8]}"
            boto3.client("s3").create_bucket(Bucket=bucket)
            rates: dict[str, list[float]] = {"local": [], "bucket": []}
            cpu_ms: dict[str, list[float]] = {"local": [], "bucket": [], "server": []}
            per_connection: list[float] = []
            requests: list[dict[str, float]] = []
            puts: list[tuple[Counter[str], set[str]]] = []
            for n in range(args.rounds):
                for where in ("local", "bucket"):
                    out = str(tmp / f"out{n}") if where == "local" else f"s3://{bucket}/out{n}"
                    offset, connections = moto.log_offset(), gate.connections
                    server_cpu = process_cpu(moto.proc.pid)
                    path = tmp / f"report-{where}{n}.json"
                    report, cpu = convert(inputs, out, fake, args, path)
                    pages = report["totals"]["pages_decoded"]
                    rates[where].append(pages / report["seconds"])
                    cpu_ms[where].append(1000 * cpu / pages)
                    if where == "bucket":
                        now = process_cpu(moto.proc.pid)
                        if server_cpu is not None and now is not None:
                            cpu_ms["server"].append(1000 * (now - server_cpu) / pages)
                        counts = moto.requests(offset, bucket=bucket)
                        per_connection.append((gate.connections - connections) / counts.total())
                        requests.append({k: counts.get(k, 0) / pages for k in KINDS})
                        puts.append(put_kinds(moto.request_log(offset, bucket=bucket)))
                    print(f"round {n + 1} {where:<6} {pages} pages, {rates[where][-1]:.2f} pages/s")
        finally:
            gate.close()
            moto.stop()

    local, remote = statistics.median(rates["local"]), statistics.median(rates["bucket"])
    per_page = {k: statistics.median(r[k] for r in requests) for k in KINDS}
    print(
        f"docs {args.docs} x {args.pages} pages, dpi {args.dpi}, latency {args.latency:g} ms, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(f"local  {local:.2f} pages/s (median of {args.rounds})")
    print(f"bucket {remote:.2f} pages/s (median of {args.rounds})")
    print("requests per page: " + ", ".join(f"{k} {v:.2f}" for k, v in per_page.items()))
    pages, (put, names) = args.docs * args.pages, puts[-1]
    print(
        f"PUTs: per page {put['raw'] / pages:.2f} raw/ + {put['images'] / pages:.2f} images/, "
        f"per document {put['document'] / args.docs:.2f} ({', '.join(sorted(names))})"
    )
    cpu = {k: statistics.median(v) for k, v in cpu_ms.items() if v}
    server = f"{cpu['server']:.1f} ms" if "server" in cpu else "n/a"
    print(
        f"CPU per page (median): hpdparse local {cpu['local']:.1f} ms, bucket "
        f"{cpu['bucket']:.1f} ms; S3 server {server}; connections per request "
        f"{statistics.median(per_connection):.2f}"
    )
    print(f"bucket/local pages per CPU-second of hpdparse: {cpu['local'] / cpu['bucket']:.2f}")
    print(f"bucket/local pages/s: {remote / local:.2f}; PUTs per page: {per_page['PUT']:.2f}")


if __name__ == "__main__":
    main()

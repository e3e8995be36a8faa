"""`convert --ray local` against single-machine `convert`, with the openai engine against the
fake HPD server (tests/helpers/fakeserver.py, in its own process), so the model is not the
bottleneck and the figures are the runner's.

Usage: python benchmarks/bench_ray.py [--docs 8] [--pages 16] [--dpi 100] [--actors 1,2,4]

Prints, for single-machine convert and for --ray with each actor count: wall seconds of the run
(the Ray runs include starting their actors) and pages/s over the decoding (first page to last,
as the run report counts it), then the overhead of one work unit: the same pages with 1-page
units against 16-page units on one actor, (wall difference) / (extra units).
Run from the repository root (actors import hpdparse from it through PYTHONPATH).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p
)
sys.path.insert(0, str(REPO))

from hpdparse import api  # noqa: E402
from hpdparse.runner.progress import Progress  # noqa: E402
from hpdparse.runner.ray.settings import RaySettings  # noqa: E402
from tests.helpers.pdfs import make_pdf  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_server(url: str, timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"fake server at {url} did not start")


def timed(inputs: list[Path], out: Path, url: str, dpi: int, ray: RaySettings | None):
    started = time.monotonic()
    report = api.convert(
        inputs, out, engine="openai", server=url, dpi=dpi, overwrite=True, ray=ray,
        progress=Progress(),
    )  # fmt: skip
    wall = time.monotonic() - started
    if report.exit_code != 0:
        raise SystemExit(f"run failed: {report.engine_error or report.documents[0].error}")
    return wall, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--pages", type=int, default=16)
    parser.add_argument("--dpi", type=int, default=100)
    parser.add_argument("--actors", default="1,2,4")
    args = parser.parse_args()

    import ray

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.fakeserver", "--port", str(port)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_server(url)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            inputs = [
                make_pdf(root / "in" / f"doc{i}.pdf", args.pages, f"bench{i}")
                for i in range(args.docs)
            ]
            pages = args.docs * args.pages
            print(f"{args.docs} documents x {args.pages} pages = {pages} pages, {args.dpi} dpi")
            wall, report = timed(inputs, root / "single", url, args.dpi, None)
            print(
                f"single-machine convert: {wall:6.1f} s wall, "
                f"{report.pages_per_second:6.1f} pages/s decoding"
            )
            ray.init(
                num_cpus=8,
                object_store_memory=200 * 2**20,
                include_dashboard=False,
                logging_level=logging.WARNING,
            )
            address = ray.get_runtime_context().gcs_address
            for actors in (int(a) for a in args.actors.split(",")):
                settings = RaySettings(address=address, actors=actors, cpus_per_actor=2.0)
                wall, report = timed(inputs, root / f"ray{actors}", url, args.dpi, settings)
                print(
                    f"--ray local, {actors} actor{'s' if actors > 1 else ' '}: {wall:6.1f} s wall, "
                    f"{report.pages_per_second:6.1f} pages/s decoding"
                )
            one_doc = inputs
            unit_pages = {}
            for size in (args.pages, 1):
                settings = RaySettings(
                    address=address, actors=1, cpus_per_actor=2.0, unit_pages=size
                )
                wall, report = timed(one_doc, root / f"unit{size}", url, args.dpi, settings)
                unit_pages[size] = (report.engine_seconds, report.cluster.units)
            (big, big_units), (small, small_units) = unit_pages[args.pages], unit_pages[1]
            overhead = (small - big) / max(1, small_units - big_units)
            print(
                f"per work unit: {overhead * 1000:.1f} ms ({small_units} one-page units in "
                f"{small:.1f} s vs {big_units} units of {args.pages} pages in {big:.1f} s, "
                "decoding time, one actor)"
            )
            ray.shutdown()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()

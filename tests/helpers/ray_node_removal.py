"""A `--ray` run on Ray's multi-node test cluster (several raylets on this machine) that loses a
node mid-run: `python -m tests.helpers.ray_node_removal PDF OUT SERVER_URL` prints one line,
`node-removal result: ` and JSON (the run's exit code, pages saved when the node went, the
actors' figures).

Run in its own process by tests/runner/ray/test_faults.py: a process holds one Ray connection,
and the tests' session cluster is another. Every node it starts is shut down at the end."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import psutil
from ray.cluster_utils import Cluster

from hpdparse import api
from hpdparse.runner.progress import Progress
from hpdparse.runner.ray.settings import RaySettings
from tests.helpers.output_trees import valid_pages
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.ray_processes import decoder_actor_pids

RESULT_MARK = "node-removal result: "
NODE = {"num_cpus": 2, "object_store_memory": 80 * 2**20}


def _node_of_an_actor(workers: list) -> object:
    """The worker node whose raylet runs a PageDecoder actor."""
    by_raylet = {node.all_processes["raylet"][0].process.pid: node for node in workers}
    for pid in decoder_actor_pids():
        parent = psutil.Process(pid).ppid()
        if parent in by_raylet:
            return by_raylet[parent]
    raise RuntimeError("no PageDecoder actor found on a worker node")


def main() -> None:
    pdf, out, server = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    pages = 24
    # The head runs no actor (no CPU); each worker node fits exactly one actor of 2 CPUs: the
    # one actor runs on one of them and comes back on the other when its node goes.
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "object_store_memory": 80 * 2**20,
        },
    )
    try:
        workers = [cluster.add_node(**NODE) for _ in range(2)]
        cluster.wait_for_nodes()
        import ray

        ray.init(address=cluster.address)
        removed: list[int] = []

        def remove_a_node() -> None:
            deadline = time.monotonic() + PATIENCE_SECONDS
            while len(valid_pages(out / "doc", pages)) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            node = _node_of_an_actor(workers)
            removed.append(len(valid_pages(out / "doc", pages)))
            cluster.remove_node(node, allow_graceful=False)

        threading.Thread(target=remove_a_node, daemon=True).start()
        settings = RaySettings(
            address=cluster.address, actors=1, cpus_per_actor=2.0, unit_pages=2,
            stall_seconds=PATIENCE_SECONDS,  # only so that a broken run ends
        )  # fmt: skip
        report = api.convert(
            [pdf], out, engine="openai", server=server, dpi=72, batch_size=2, ray=settings,
            progress=Progress(),
        )  # fmt: skip
        cluster_report = report.cluster.to_json() if report.cluster else None
        print(
            RESULT_MARK
            + json.dumps(
                {
                    "exit_code": report.exit_code,
                    "error": report.engine_error or report.documents[0].error,
                    "removed_with_saved_pages": removed[0] if removed else None,
                    "cluster": cluster_report,
                }
            ),
            flush=True,
        )
        ray.shutdown()
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()

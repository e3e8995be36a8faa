"""vLLM's engine core in a process of its own (``--engine-option engine_core=process``).

``inline`` (in-process ``LLMEngine``, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) runs vLLM's scheduler,
the model, vLLM's output processing and hpdparse's page scheduler one after the other in one
thread. ``process`` is vLLM's own default for ``LLMEngine``/``LLM``: the engine core (scheduler and
model) runs in a child process and steps on its own while this process renders inputs, absorbs
outputs and adds children; requests and outputs cross over ZeroMQ.

What changes for hpdparse there, all of it here:

- A page's tiles cross the process boundary once. A child request carries its page's image
  input (the same tensor as the parent's); over vLLM's default transport every child would
  re-send the page's pixels. vLLM's shared-memory tensor transport (``mm_tensor_ipc="torch_shm"``,
  0.26 and later) moves a tensor into shared memory the first time it is sent and passes a handle
  afterwards, so a child costs a handle, not a copy, and there is no cache that could miss: every
  request carries its image (vLLM's processor cache instead sends an item once and then only its
  hash, and a receiver-side miss fails the request on 0.32 and stops the engine on 0.26).
  It needs one engine-core rank (no tensor or pipeline parallelism); with more, vLLM's default
  transport is kept.
- Admission control reads what waits from the client side (`frontend_waiting`): the requests
  vLLM has not yet returned a first token for, and the prompt tokens of the pages among them.
- The engine core must not outlive this process: `watch_parent` (started by the plugin in the
  engine-core process) ends it when its parent dies, however the parent died.
- vLLM's ZeroMQ socket files (seven a start) are left in the temporary folder after the engine
  has shut down, so a process-mode run puts them in a folder of its own that it removes as it
  exits (`private_socket_folder`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

# Set while a process-mode engine starts its engine core; read by the plugin there.
PARENT_ENV = "HPDPARSE_ENGINE_PARENT"
PARENT_POLL_SECONDS = 0.5
START_METHOD_ENV = "VLLM_WORKER_MULTIPROC_METHOD"
SOCKET_FOLDER_ENV = "VLLM_RPC_BASE_PATH"  # where vLLM creates its ZeroMQ ipc:// socket files
_watching = False  # this process watches its parent


def private_socket_folder() -> None:
    """Have vLLM create its ZeroMQ socket files in a folder of this process's own, removed with
    them when the process exits (a user's own VLLM_RPC_BASE_PATH is kept). One folder for the
    process's life, not one per engine: vLLM may keep the first value it reads (its envs cache)."""
    if SOCKET_FOLDER_ENV not in os.environ:
        os.environ[SOCKET_FOLDER_ENV] = _socket_folder()


@functools.cache
def _socket_folder() -> str:
    # A short name: a socket's path must fit in 107 bytes with vLLM's 36-character file names.
    path = tempfile.mkdtemp(prefix="hpd-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def engine_args(fields: set[str], extra: dict[str, Any]) -> dict[str, str]:
    """EngineArgs for a process-mode engine core: the shared-memory tensor transport where it
    exists and one rank runs the core (the user's own choice wins)."""
    ranks = int(extra.get("tensor_parallel_size") or 1) * int(
        extra.get("pipeline_parallel_size") or 1
    )
    # vLLM refuses torch_shm with forked processes; a user's own start method is kept.
    spawn = os.environ.get(START_METHOD_ENV, "spawn") == "spawn"
    chosen = extra.get("mm_tensor_ipc")
    args: dict[str, str] = {}
    if chosen is None and "mm_tensor_ipc" in fields and ranks == 1 and spawn:
        chosen = args["mm_tensor_ipc"] = "torch_shm"
    if chosen == "torch_shm":
        os.environ.setdefault(START_METHOD_ENV, "spawn")
    return args


def frontend_waiting(output_processor: Any) -> tuple[int, int]:
    """(requests, prompt tokens of pages) that the multiprocess engine core has not returned a
    first token for: waiting in its scheduler or prefilling. A child's prompt is the page's
    prompt (prefix-cached) plus a few tokens, so only parents' prompt tokens are counted."""
    count = tokens = 0
    for request_id, state in output_processor.request_states.items():
        if state.is_prefilling:
            count += 1
            name = getattr(state, "external_req_id", None) or request_id
            if ".c" not in name:
                tokens += int(state.prompt_len or 0)
    return count, tokens


def watch_parent() -> bool:
    """In a process-mode engine-core process: end this process (SIGTERM, which vLLM's engine
    core handles by shutting down) once the process that started the engine has gone, however
    it went (Ctrl-C, SIGTERM, SIGKILL, a crash). Returns whether a watch was started."""
    global _watching
    parent = os.environ.get(PARENT_ENV)
    # Only in a direct child of the engine's process: not in that process itself, nor in a
    # worker of the core.
    if _watching or not parent or not parent.isdigit() or os.getppid() != int(parent):
        return False
    parent_pid = int(parent)
    _watching = True
    threading.Thread(
        target=_watch, args=(parent_pid,), name="hpdparse-parent-watch", daemon=True
    ).start()
    return True


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_SECONDS)
    log.warning("hpdparse: the engine's parent process %d is gone; stopping", parent_pid)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
    os._exit(1)  # the engine core did not stop on SIGTERM


_watch_forked_children = False


@contextlib.contextmanager
def children_watch_parent(process: bool) -> Iterator[None]:
    """While a process-mode engine starts: every process it forks watches this one
    (`watch_parent`); a spawned engine core starts its watch from the plugin, reading
    `PARENT_ENV`."""
    global _watch_forked_children
    if not process:
        yield
        return
    _register_fork_hook()
    _watch_forked_children = True
    # Only while the engine starts, so that no later subprocess of this one takes it for its
    # engine core.
    os.environ[PARENT_ENV] = str(os.getpid())
    try:
        yield
    finally:
        _watch_forked_children = False
        os.environ.pop(PARENT_ENV, None)


@functools.cache
def _register_fork_hook() -> None:
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _after_fork_in_child() -> None:
    if _watch_forked_children:
        watch_parent()

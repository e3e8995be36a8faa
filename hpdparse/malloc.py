"""glibc's malloc parameters, set through ctypes (`mallopt`), for processes that allocate and free
large buffers again and again: the rasterizer workers (`runner/workers.py`) and vLLM on a CPU
(`engines/vllm/host_memory.py`). Off Linux, or with another C library, nothing is set."""

from __future__ import annotations

import ctypes
import sys

# mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1  # free memory at the heap's top kept up to this many bytes
M_MMAP_THRESHOLD = -3  # blocks at least this large are mmap'd (and unmapped when freed)
M_MMAP_MAX = -4  # at most this many blocks mmap'd at once (0: every block from the heap)


def mallopt(*settings: tuple[int, int]) -> bool:
    """Set each (parameter, value) in order, stopping at the first one glibc refuses. Returns
    whether every one was set (False off Linux or with a C library other than glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    # The process's own symbols, libc's among them (`ctypes.util.find_library` would start
    # `ldconfig -p` in every rasterizer worker to find the same library).
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False  # another C library (musl has no mallopt of these parameters)
    return all(libc.mallopt(parameter, value) == 1 for parameter, value in settings)

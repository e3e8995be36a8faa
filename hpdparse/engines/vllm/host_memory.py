"""glibc's malloc set for vLLM on a CPU: large blocks from the heap, and freed memory kept.

Every decoding step makes tensors of (tokens in the step) x (vocabulary) floats: the logits,
the rejection sampler's copies of them, the log-probabilities behind the confidence scores;
about 120 MB each for 200 tokens at HPD-Parsing's 151,681-token vocabulary. glibc serves blocks
that large with mmap and unmaps them when they are freed, so every step maps fresh pages, takes
a page fault for each 4 KiB and has the kernel zero it. Measured on one core of the 2-core
development machine (200 x 151,681 float32): a clone took 84 ms that way and 11 ms from memory
the process kept, `torch.zeros_like` 70 and 19 ms, a log-softmax 81 and 28 ms. vLLM's CPU guide
preloads tcmalloc for the same reason; this needs nothing installed.

The price: memory the process freed stays its own (its resident size stays at its high-water
mark) instead of going back to the system. Applied only by hpdparse's own vLLM engine on a CPU
(which sets ``ENV`` to 1 unless the user set it), in its process and, through the plugin, in the
processes vLLM starts for it; a plain ``vllm serve`` is left as it is. ``ENV=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

ENV = "HPDPARSE_VLLM_KEEP_FREED_MEMORY"
# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_KEEP_UP_TO = 1 << 30  # free memory at the heap's top returned to the system beyond 1 GiB

_applied = False


def wanted() -> bool:
    """Whether this process's vLLM engine asked for it (``ENV`` is 1)."""
    return os.environ.get(ENV) == "1"


def applied() -> bool:
    """Whether malloc was set so in this process."""
    return _applied


def keep_freed_memory() -> bool:
    """Serve every block from the heap and keep freed memory (glibc on Linux; elsewhere nothing).
    Returns whether malloc is set so in this process."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False  # another C library (musl has no mallopt of these parameters)
    no_mmap = libc.mallopt(_M_MMAP_MAX, 0) == 1
    _applied = no_mmap and libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_UP_TO) == 1
    return _applied

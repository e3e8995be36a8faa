"""glibc's malloc set for vLLM on a CPU: large blocks from the heap, and freed memory kept.

Every decoding step makes tensors of (tokens in the step) x (vocabulary) floats: the logits,
the rejection sampler's copies of them, the log-probabilities behind the confidence scores;
about 120 MB each for 200 tokens at HPD-Parsing's 151,681-token vocabulary. glibc serves blocks
that large with mmap and unmaps them when they are freed, so every step maps fresh pages, takes
a page fault for each 4 KiB and has the kernel zero it: several times the cost of the same
work in memory the process kept. vLLM's CPU guide preloads tcmalloc for the same reason; this
needs nothing installed.

The price: memory the process freed stays its own (its resident size stays at its high-water
mark) instead of going back to the system. Applied only by hpdparse's own vLLM engine on a CPU
(which sets ``ENV`` to 1 unless the user set it), in its process and, through the plugin, in the
processes vLLM starts for it; a plain ``vllm serve`` is left as it is. ``ENV=0`` turns it off.
"""

from __future__ import annotations

from hpdparse.malloc import M_MMAP_MAX, M_TRIM_THRESHOLD, mallopt

ENV = "HPDPARSE_VLLM_KEEP_FREED_MEMORY"
_KEEP_UP_TO = 1 << 30  # free memory at the heap's top returned to the system beyond 1 GiB

_applied = False


def applied() -> bool:
    """Whether malloc was set so in this process."""
    return _applied


def keep_freed_memory() -> bool:
    """Serve every block from the heap and keep freed memory (glibc on Linux; elsewhere nothing).
    Returns whether malloc is set so in this process."""
    global _applied
    if not _applied:
        _applied = mallopt((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, _KEEP_UP_TO))
    return _applied

"""The C heap of a learner or worker process: keep freed memory instead of handing it back.

glibc's ``malloc`` serves a large block (above its mmap threshold, 128 KiB to start, raised as
such blocks are freed) with a fresh ``mmap`` and unmaps it on ``free``; whatever it does keep at
the top of the heap it trims back to the kernel once more than twice that threshold lies free.
An update allocates and frees the same large activations every minibatch (MinAtar's conv
outputs), so every minibatch pays the kernel to map, zero and fault those pages in again; with the
thresholds fixed those page faults are gone (``python -m bench.bench_update --configs
minatar_breakout_ppo`` counts them; docs/ppo.md, "Speed of the update"). This is what jemalloc or
tcmalloc under ``LD_PRELOAD`` buys PyTorch on CPUs, without a second allocator to install.

``retain``: blocks up to 32 MiB (glibc's ceiling for the threshold) come from the heap, and up
to 256 MiB of free heap is kept for the next minibatch. ``system``: glibc's defaults. Where the
C library is not glibc (macOS, musl) nothing changes. Allocation never changes the arithmetic:
a seeded run repeats bit for bit either way.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Literal

MallocMode = Literal["retain", "system"]

# mallopt(3) parameter numbers (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit glibc: a larger value is refused
TRIM_THRESHOLD = 256 << 20

_applied: MallocMode | None = None


def configure_malloc(mode: MallocMode) -> bool:
    """Set this process's heap policy (``retain`` or ``system``, above) once; returns whether
    glibc's thresholds are now fixed at the ``retain`` values. Safe to call in every actor and
    in-process: a later call with another mode does not undo the first (glibc has no reset)."""
    global _applied
    if mode == "system" or not sys.platform.startswith("linux"):
        return _applied == "retain"
    if _applied == "retain":
        return True
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # Setting either threshold also turns off glibc's dynamic threshold, which is what trims.
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if ok:
        _applied = "retain"
    return ok

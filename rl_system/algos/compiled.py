"""``torch.compile`` for the update's hot function, with eager PyTorch as the fallback.

Compiling needs what eager does not: a C++ compiler for inductor's CPU kernels (Triton for GPU
ones), and graphs Dynamo can capture. Where any of that is missing the first call fails; a run
must not die of an optimisation, so :class:`CompiledOrEager` then says why once (a warning, which
a Ray actor's log keeps) and calls the plain function from then on.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from rl_system.errors import one_line


class CompiledOrEager:
    """``fn`` compiled (``dynamic=False``: the update's shapes are fixed per run; a smaller last
    minibatch compiles once more); eager ``fn`` if compiling or running the compiled code fails.
    ``compiled`` says which is in use; ``error`` why not, if not."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.compiled_fn = torch.compile(fn, dynamic=False)
        self.compiled, self.error = True, None

    def __call__(self, *args: Any) -> Any:
        if self.compiled:
            try:
                return self.compiled_fn(*args)
            except Exception as err:  # noqa: BLE001 - no compiler, an unsupported op, ...: run eager
                self.compiled, self.error = False, one_line(err, with_type=True)
                warnings.warn(f"torch.compile failed, the update runs eager: {self.error}", stacklevel=2)
        return self.fn(*args)

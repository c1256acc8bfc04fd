"""What runs in bfloat16 under ``learner.precision: bf16``.

The learner runs the update inside :func:`update_autocast`: matrix products and convolutions of
the encoders and recurrent cores take bf16, which CPUs with AVX-512 BF16 or AMX and GPUs' tensor
cores multiply faster than float32; the weights, the optimiser and the losses stay float32.
PPO's output MLPs (:class:`Float32Head`) stay float32 too, a small share of its update. HMASD's
heads and discriminators, where whole float32 heads would give back much of bf16's gain, run in
bf16 but for their last layer (:class:`Float32Linear`), so log-probabilities and values are
float32 in both (docs/ppo.md, "Speed of the update"; docs/lab/results.md and docs/lab/hmasd.md,
2026-12-02); HMASD's round preparation runs in float32.

The region must not cache its casts: with autocast's cache every minibatch after the first runs
on the round's first weights, and the bf16 update then moves the weights much further than the
float32 one and in another direction; uncached, it stays as close to float32's as two float32
updates on different thread counts are to each other (docs/ppo.md, "Speed of the update";
docs/lab/hmasd.md, 2026-12-02).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch
from torch import nn

from rl_system.algos.activations import inplace_activation


def update_autocast(device_type: str, enabled: bool) -> AbstractContextManager:
    """bf16 autocast for a whole update, optimiser steps included. Without its cache: autocast
    keeps the bf16 copy of each weight it casts until the region ends, so after the first
    optimiser step every later minibatch would run forward and backward on the round's first
    weights. PPO's ratio then stays at 1, the clip never binds, and the update overshoots."""
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=enabled, cache_enabled=False)


class Float32Head(nn.Sequential):
    """An output MLP (logits, values, discriminator scores) that computes in float32 even inside
    an autocast region; outside one it is a plain ``nn.Sequential`` (same ``state_dict`` keys).

    Without gradients (a sampler's step), a ``[B, F]`` input takes :meth:`_infer`: the same
    ``addmm`` calls ``nn.Linear`` makes and the activations in place, without the modules' calls
    around them: the same bits without the per-module Python overhead, which a sampler would pay
    for two heads every step (docs/lab/results.md, 2026-12-03)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(x.device.type):
            with torch.autocast(x.device.type, enabled=False):
                return super().forward(x.float())
        if x.dim() == 2 and not torch.is_grad_enabled() and not _tracing():
            plan = self.__dict__.get("_plan")
            if plan is None:
                plan = self._build_plan()
            if plan is not _NO_PLAN:
                return _infer(plan, x)
        return super().forward(x)

    def _build_plan(self) -> list:
        """``[(weight, bias), activation, ...]`` in layer order, or ``_NO_PLAN`` where a layer is
        neither ``nn.Linear`` nor a known activation. Holds the parameters themselves, which
        ``load_state_dict`` and optimiser steps update in place; ``.to()`` and the like drop the
        plan (:meth:`_apply`), since they may swap the parameters."""
        plan: list = []
        for module in self:
            if type(module) in (nn.Linear, Float32Linear):
                plan.append((module.weight, module.bias))
            elif (act := inplace_activation(module)) is not None and plan and isinstance(plan[-1], tuple):
                plan.append(act)
            else:
                plan = _NO_PLAN
                break
        self.__dict__["_plan"] = plan
        return plan

    def _apply(self, fn, recurse: bool = True):
        self.__dict__.pop("_plan", None)
        return super()._apply(fn, recurse)

    def __getstate__(self) -> dict:
        # A copy or an unpickled head builds its own plan (of its own parameters; the plan's
        # activations may be closures, which do not pickle).
        state = dict(self.__dict__)
        state.pop("_plan", None)
        return state


_NO_PLAN: list = []


def _tracing() -> bool:
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


def _infer(plan: list, x: torch.Tensor) -> torch.Tensor:
    """``x [B, F]`` through ``plan`` (:meth:`Float32Head._build_plan`), without autograd."""
    for step in plan:
        if type(step) is tuple:
            weight, bias = step
            x = torch.mm(x, weight.t()) if bias is None else torch.addmm(bias, x, weight.t())
        else:
            x = step(x)  # in place: x is the product just made
    return x


class Float32Linear(nn.Linear):
    """A last linear layer (logits, values, discriminator scores) that computes in float32 inside
    an autocast region, on the bf16 features before it: the log-probabilities of PPO's ratio and
    the values keep float32's digits at the cost of one small matmul, where a whole
    :class:`Float32Head` would cost a large share of HMASD's bf16 update (docs/lab/hmasd.md,
    2026-12-02). Same ``state_dict`` keys as ``nn.Linear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(x.device.type):
            with torch.autocast(x.device.type, enabled=False):
                return nn.functional.linear(x.float(), self.weight, self.bias)
        return super().forward(x)

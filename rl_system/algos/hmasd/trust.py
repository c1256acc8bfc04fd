"""A hard KL bound on one network's PPO epochs in a round (not in the paper).

PPO's clipped loss only stops the gradient of samples whose ratio has left ``[1 - clip, 1 + clip]``;
it does not bound how far one step moves a near-deterministic policy. On AliceBob a solved run's
coordinator once took one update far past the KL of the rounds before, and the team's success
collapsed with it (docs/lab/hmasd.md, 2026-11-28, seed 106). ``hmasd.high_target_kl`` puts a
:class:`TrustRegion` on the coordinator.

After each of the network's steps the caller measures the KL of the new weights to the policy that
sampled the round (one forward pass over the round's samples, no gradients). A step that leaves the
region is shrunk along its own direction, as in TRPO's line search: the weights go to
``before + 2**-j * (after - before)`` for ``j = 1 ..`` :data:`MAX_HALVINGS` until the KL is within
the target. Only a step that no shrinking brings back (the weights before it already at the
bound, or a round that started outside it) is undone, and the network then sits out the rest of
the round's epochs.

Why a line search and not "undo and sit out": with Adam a single step moves every weight by about
``lr`` whatever the gradient's size, and near a sharpened plan that one step can exceed the target.
Undoing it then undid every round from there on: the coordinator froze to the end of the run with
its plan half-learned (docs/lab/hmasd.md, 2026-11-28/29, "the coordinator's KL bound").
Adam's moments keep each step's gradient either way: it was a gradient of this round's data.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

MAX_HALVINGS = 6
"""Shrinks tried before a step is undone: down to 1/64 of it, about 1/4096 of its KL (KL grows with
the square of a small step)."""


class TrustRegion:
    """Keeps one network within ``target_kl`` of the policy that sampled the round.

    Use per round: :meth:`start`; before each of the network's steps :meth:`before_step`; after it,
    :meth:`after_step` with a function that returns the KL of the current weights. ``active`` says
    whether the network still takes steps this round.
    """

    def __init__(self, params: list[nn.Parameter], target_kl: float):
        self.params, self.target_kl = params, target_kl
        self.active = True
        self.reverted = False
        self.steps_kept = 0
        self.halvings = 0
        self._before: torch.Tensor | None = None  # weights before the step under way

    def start(self) -> None:
        self.active, self.reverted, self.steps_kept, self.halvings = True, False, 0, 0
        self._before = None

    @torch.no_grad()
    def before_step(self) -> None:
        self._before = parameters_to_vector(self.params).clone()

    @torch.no_grad()
    def after_step(self, kl: Callable[[], float]) -> None:
        """``kl()``: the KL of the current weights to the sampling policy. Not called for a step
        that was skipped (non-finite): its snapshot is simply replaced."""
        if kl() <= self.target_kl:
            self.steps_kept += 1
            return
        before = self._before
        step = parameters_to_vector(self.params) - before
        for j in range(1, MAX_HALVINGS + 1):
            self._restore(before + step * 2.0 ** -j)
            self.halvings += 1
            if kl() <= self.target_kl:
                self.steps_kept += 1
                return
        # No shrink of this step is inside: the weights before it were already at (or past) the
        # bound. Back to them, and the network sits out the rest of the round.
        self._restore(before)
        self.active, self.reverted = False, True

    @torch.no_grad()
    def _restore(self, flat: torch.Tensor) -> None:
        # In place: the parameters keep their own storage (vector_to_parameters would make each
        # one a view of the snapshot, and every shipped weight would then carry all of it).
        for p, saved in zip(self.params, flat.split([p.numel() for p in self.params])):
            p.copy_(saved.view_as(p))

    def metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}kl_reverted": float(self.reverted), f"{prefix}steps_kept": float(self.steps_kept),
                f"{prefix}step_halvings": float(self.halvings)}

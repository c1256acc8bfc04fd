"""A hard KL bound on one network's PPO epochs in a round (not in the paper).

PPO's clipped loss only stops the gradient of samples whose ratio has left ``[1 - clip, 1 + clip]``;
it does not bound how far one step moves a near-deterministic policy. On AliceBob a solved run's
coordinator once took a round with approximate KL 0.133 against 6e-5 to 3e-4 in the rounds before,
and the team's success fell from 1.00 to 0.02 (docs/hmasd.md, "Diagnosis of late collapses").
``hmasd.high_target_kl`` puts a :class:`TrustRegion` on the coordinator.

The approximate KL a minibatch reports is that of the weights *before* its step (the forward pass
that computes the loss), so a step's KL is only known one minibatch later. The region therefore
keeps the weights from before the previous step: when a minibatch reports a KL above the target,
the step that caused it is undone (the weights go back to those before it, whose KL was within the
target) and the network sits out the rest of the round's epochs. After the last epoch the caller
measures the final weights' KL once more (:meth:`TrustRegion.finish`), so no round ends beyond the
target. Adam's moments keep the undone step's gradient: it was a gradient of this round's data.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parameters_to_vector


class TrustRegion:
    """Keeps one network within ``target_kl`` of the policy that sampled the round.

    Use per round: :meth:`start`; before each of the network's steps :meth:`before_step`; after it,
    :meth:`after_step` with the KL that step's minibatch reported; at the end :meth:`finish` with
    the final weights' KL. ``active`` says whether the network still takes steps this round.
    """

    def __init__(self, params: list[nn.Parameter], target_kl: float):
        self.params, self.target_kl = params, target_kl
        self.active = True
        self.reverted = False
        self.steps_kept = 0
        self._last: torch.Tensor | None = None  # weights before the last step taken
        self._pending: torch.Tensor | None = None  # weights before the step under way

    def start(self) -> None:
        self.active, self.reverted, self.steps_kept = True, False, 0
        self._last = self._pending = None

    @torch.no_grad()
    def before_step(self) -> None:
        self._pending = parameters_to_vector(self.params).clone()

    @torch.no_grad()
    def after_step(self, kl_before_step: float) -> None:
        """``kl_before_step``: the KL of the weights this step started from (its minibatch's). Not
        called for a step that was skipped (non-finite): its snapshot is simply replaced."""
        if kl_before_step <= self.target_kl:
            self._last = self._pending
            self.steps_kept += 1
            return
        # The last step left the region: back to the weights before it (this step goes with it).
        # Where no step was taken yet the round started outside (a stale rollout): it stays there.
        self._restore(self._last if self._last is not None else self._pending)
        self.steps_kept -= self._last is not None
        self.active, self.reverted = False, True

    @torch.no_grad()
    def finish(self, final_kl: float) -> None:
        """Undo the round's last step if the weights it left are beyond the target."""
        if self.active and final_kl > self.target_kl and self._last is not None:
            self._restore(self._last)
            self.reverted = True
            self.steps_kept -= 1
        self.active = False

    @torch.no_grad()
    def _restore(self, flat: torch.Tensor) -> None:
        # In place: the parameters keep their own storage (vector_to_parameters would make each
        # one a view of the snapshot, and every shipped weight would then carry all of it).
        for p, saved in zip(self.params, flat.split([p.numel() for p in self.params])):
            p.copy_(saved.view_as(p))

    def metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}kl_reverted": float(self.reverted), f"{prefix}steps_kept": float(self.steps_kept)}

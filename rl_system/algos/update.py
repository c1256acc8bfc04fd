"""The update every algorithm runs: epochs of minibatch steps on one round's prepared batch.

An algorithm is its preparation (GAE, V-trace, the hierarchy's returns: what the epochs train on),
its minibatches' row counts and its loss. Everything between the two is written here once:

* :meth:`Trainer.update` -- the round's skeleton: the learning rate, ``prepare``, the epochs of
  ``epochs()``'s minibatches, the round's metrics;
* :class:`UpdateCore` -- builds the optimiser from an :class:`OptimizerSpec` and owns it and its
  checkpointed state (:meth:`UpdateCore.state_dict`);
* :meth:`UpdateCore.set_lr` -- the learning rate for the share of the step budget used (linear
  annealing where configured), times ``lr_scale`` (a rollback on collapse lowers it);
* :class:`Minibatches` -- the epochs of a flat batch (rows are steps) or of sequences (rows are
  env sequences, for BPTT): each epoch a permutation of the learner group's rows cut into
  minibatches, every learner keeping its own rows of each;
* :meth:`UpdateCore.step` -- one gradient step: the loss writes its gradients, the group
  all-reduces gradients and statistics in one call, the statistics become minibatch means, the
  gradients are clipped per parameter group, a step with a non-finite statistic or norm is
  dropped (a NaN would poison the weights and Adam's moments), and the optimiser steps;
* :meth:`UpdateCore.run_epochs` -- the epoch loop: statistics summed per name over the steps that
  reported them, dropped steps counted, an early stop once a step's KL passes ``target_kl``.

A learner group (:mod:`rl_system.collective`) is handed to the core when the trainer is built; a
loss written for one learner (its sums divided by the global minibatch's rows) then takes the
one-learner steps on N learners, because every reduction above runs over the group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import torch
from torch import nn

from rl_system import collective
from rl_system.algos import LR, MINIBATCH_STEPS, SKIPPED_MINIBATCHES
from rl_system.algos.adam import make_adam

M = TypeVar("M")

Gradients = Callable[[], torch.Tensor]
"""Writes this learner's gradients of one minibatch's loss into the parameters and returns its
statistics ``[len(names)]`` (no grad): sums over its rows, or its shares of the means."""


@dataclass
class EpochStats:
    """What :meth:`UpdateCore.run_epochs` did: statistic sums and how many steps reported each,
    the steps taken and the steps dropped (not finite)."""

    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    skipped: int = 0

    def add(self, stats: dict[str, float]) -> None:
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
            self.counts[k] = self.counts.get(k, 0) + 1
        self.steps += 1

    def report(self, lr: float) -> dict[str, float]:
        """The metrics every trainer reports: the update's learning rate, steps taken and dropped."""
        return {LR: lr, MINIBATCH_STEPS: self.steps, SKIPPED_MINIBATCHES: self.skipped}

    def means(self, names: Iterable[str] = ()) -> dict[str, float]:
        """Each statistic's mean over the steps that reported it; ``names`` that no step reported: 0."""
        out = dict.fromkeys(names, 0.0)
        out.update({k: v / self.counts[k] for k, v in self.sums.items()})
        return out


@dataclass(frozen=True)
class OptimizerSpec:
    """The optimiser an algorithm asks of the core: ``kind`` ``adam`` (:func:`~rl_system.algos.adam.make_adam`;
    ``fused: false`` takes ``torch.optim.Adam``'s default steps) or ``rmsprop`` (``torch.optim.RMSprop``
    with smoothing ``alpha``), at learning rate ``lr`` with ``eps``."""

    lr: float
    eps: float = 1e-5
    kind: Literal["adam", "rmsprop"] = "adam"
    fused: bool = True
    alpha: float = 0.99

    def build(self, params: Sequence[nn.Parameter]) -> Any:
        if self.kind == "rmsprop":
            return torch.optim.RMSprop(params, lr=self.lr, alpha=self.alpha, eps=self.eps)
        return make_adam(params, lr=self.lr, eps=self.eps, fused=self.fused)


class UpdateCore:
    """The optimiser's side of an update, shared by every algorithm: it builds the optimiser of
    ``spec`` over ``params`` and owns it, its checkpointed state and its learning rate.

    ``params``: the policy's parameters in a fixed order (the group reduces their gradients as one
    flat buffer); ``clip_groups``: the sets whose gradient norms are clipped each on its own to
    ``max_grad_norm`` (default: all of ``params`` together); ``group``: the learner group."""

    def __init__(self, params: Iterable[nn.Parameter], spec: OptimizerSpec, *, anneal_lr: bool,
                 max_grad_norm: float, clip_groups: Sequence[Sequence[nn.Parameter]] | None = None,
                 group: collective.Collective = collective.SOLO):
        self.params = list(params)
        self.optimizer = spec.build(self.params)
        self.clip_groups = [list(g) for g in clip_groups] if clip_groups is not None else [self.params]
        self.lr, self.anneal_lr, self.max_grad_norm = spec.lr, anneal_lr, max_grad_norm
        self.group = group
        self.lr_scale = 1.0
        self.skipped_updates = 0
        """Minibatch steps dropped so far for a non-finite loss or gradient (a run-wide count)."""

    def set_lr(self, progress: float) -> float:
        """The learning rate for ``progress`` in [0, 1] (the share of the step budget used), set on
        every parameter group of the optimiser; returns it."""
        lr = (self.lr * max(1.0 - progress, 0.0) if self.anneal_lr else self.lr) * self.lr_scale
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        return lr

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the optimiser: ``{"optimizer": its state}``."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """From :meth:`state_dict`, or from an optimiser's bare state (HMASD's checkpoints and
        PPO's first ones held it so)."""
        self.optimizer.load_state_dict(state.get("optimizer", state))

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def idle_step(self, names: Sequence[str], rows: int = 1) -> dict[str, float] | None:
        """The step of a learner that holds no row of a minibatch: zero statistics, no gradients,
        and it still joins the group's reduce (whose sums are the whole minibatch's)."""
        def gradients() -> torch.Tensor:
            self.zero_grad()
            return torch.zeros(len(names), device=self.params[0].device)
        return self.step(gradients, names, rows)

    def backward(self, loss_fn: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """A :data:`Gradients` by autograd: zeroes the gradients, backpropagates ``loss_fn()``'s
        ``(loss, statistics)`` and returns the statistics."""
        self.zero_grad()
        loss, stats = loss_fn()
        loss.backward()
        return stats

    def step(self, gradients: Gradients, names: Sequence[str], rows: int = 1,
             clip: Callable[[], list[torch.Tensor]] | None = None,
             after_reduce: Callable[[], None] | None = None) -> dict[str, float] | None:
        """One optimiser step on one minibatch; returns its statistics ``{name: value / rows}``,
        or None (weights and moments untouched) where a statistic or a gradient norm is not finite.

        ``clip``: clips the gradients and returns their norms (default: each clip group to
        ``max_grad_norm``); ``after_reduce``: runs once the group's gradients are in place (a network
        that had no rows anywhere in the group drops its gradient there)."""
        values = gradients()
        group = self.group
        if group.world > 1:
            flat = group.all_reduce(torch.cat([collective.flat_grads(self.params), values]))
            collective.set_grads(self.params, flat[:-len(names)])
            values = flat[-len(names):]
        if after_reduce is not None:
            after_reduce()
        if rows != 1:
            values = values / rows
        stats = dict(zip(names, values.tolist()))
        norms = clip() if clip is not None else self.clip_norms()
        if not (all(math.isfinite(v) for v in stats.values()) and all(math.isfinite(n) for n in norms)):
            self.zero_grad()
            return None
        self.optimizer.step()
        return stats

    def clip_norms(self) -> list[torch.Tensor]:
        """Clips each clip group's gradients to ``max_grad_norm``; their norms before clipping."""
        return [nn.utils.clip_grad_norm_(g, self.max_grad_norm, foreach=True) for g in self.clip_groups]

    def run_epochs(self, num_epochs: int, minibatches: Callable[[], Iterable[M]],
                   step: Callable[[M], dict[str, float] | None], target_kl: float | None = None,
                   kl_name: str = "approx_kl") -> EpochStats:
        """``num_epochs`` passes of ``step`` over ``minibatches()`` (called once per epoch: each
        epoch draws its own permutation). With ``target_kl``, the update stops after the first step
        whose statistic ``kl_name`` exceeds it."""
        out = EpochStats()
        for _ in range(num_epochs):
            for mb in minibatches():
                stats = step(mb)
                if stats is None:
                    out.skipped += 1
                    continue
                out.add(stats)
                if target_kl is not None and stats[kl_name] > target_kl:
                    self.skipped_updates += out.skipped
                    return out
        self.skipped_updates += out.skipped
        return out


@dataclass
class Minibatch:
    """One step's share of a minibatch: ``data``, this learner's rows (maybe none: ``held`` false);
    ``rows``, the loss rows of the whole minibatch over the group (its losses are sums divided by
    them); ``extra``, what else the algorithm's loss takes (e.g. the group's advantage statistics)."""

    data: dict[str, torch.Tensor]
    rows: int = 1
    extra: Any = None
    held: bool = True


class Trainer:
    """Base of the trainers built on an :class:`UpdateCore` (``self.core``): the round's skeleton
    (:meth:`update`) and the :class:`~rl_system.algos.protocols.Trainer` attributes that the learner
    reads and sets. An algorithm writes :meth:`prepare`, :meth:`epochs` and :meth:`loss` (and
    names its statistics in ``stat_names``); the hooks (:meth:`epochs_context`,
    :meth:`round_metrics`, :meth:`step`, :meth:`extra_state`) are there where it needs more."""

    core: UpdateCore
    stat_names: tuple[str, ...] = ()
    """The statistics a step reports, in the order :meth:`loss` stacks them."""

    # -- the skeleton ------------------------------------------------------------------------
    def update(self, batch: dict[str, torch.Tensor], progress: float) -> dict[str, float]:
        """One round: the learning rate for ``progress`` in [0, 1] (the share of the step budget
        used), :meth:`prepare`, ``num_epochs`` passes over the minibatches of :meth:`epochs` (stopping early past
        ``target_kl``), then the means of the steps' statistics, :meth:`round_metrics` and the
        core's report (lr, steps taken and dropped)."""
        core = self.core
        lr = core.set_lr(progress)
        data = self.prepare(batch)
        with self.epochs_context(data):
            done = core.run_epochs(self.num_epochs, self.epochs(data, batch), self.step, self.target_kl)
        metrics = done.means(self.stat_names)
        metrics.update(self.round_metrics(batch, data))
        metrics.update(done.report(lr))
        return metrics

    num_epochs: int = 1
    """Passes over the round's batch (an algorithm's config usually sets it)."""
    target_kl: float | None = None
    """Stop the epochs after the first step whose ``approx_kl`` passes it (None: never)."""

    def prepare(self, batch: dict[str, torch.Tensor]) -> Any:
        """What the epochs train on, from a round's batch (``[T, N, ...]`` columns)."""
        raise NotImplementedError

    def epochs(self, data: Any, batch: dict[str, torch.Tensor]) -> Callable[[], Iterable[Minibatch]]:
        """The round's epochs over ``data = prepare(batch)``: a function that draws one epoch's
        minibatches each time it is called."""
        raise NotImplementedError

    def loss(self, mb: Minibatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, statistics)``: this learner's share of the minibatch's loss (differentiable)
        and its statistics ``[len(stat_names)]`` (sums over its rows; no grad)."""
        raise NotImplementedError

    def step(self, mb: Minibatch) -> dict[str, float] | None:
        """One gradient step on ``mb``: autograd of :meth:`loss` (an idle step where this learner
        holds none of its rows); None where it was dropped (not finite)."""
        core = self.core
        if not mb.held:
            return core.idle_step(self.stat_names, mb.rows)
        return core.step(lambda: core.backward(lambda: self.loss(mb)), self.stat_names, mb.rows)

    def epochs_context(self, data: Any) -> AbstractContextManager:
        """The context the epochs run in (e.g. inference mode where no step needs autograd)."""
        return nullcontext()

    def round_metrics(self, batch: dict[str, torch.Tensor], data: Any) -> dict[str, float]:
        """The round's metrics besides the steps' statistics, computed after the epochs."""
        return {}

    # -- checkpointed state --------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The core's optimiser state and the algorithm's :meth:`extra_state`: what a checkpoint
        needs besides the policy weights."""
        return {**self.core.state_dict(), **self.extra_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.core.load_state_dict(state)
        self.load_extra_state(state)

    def extra_state(self) -> dict[str, Any]:
        """The algorithm's own checkpointed state (e.g. reward-scaling statistics), beside ``optimizer``."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`extra_state` from a checkpoint's trainer state (keys may be missing in
        older checkpoints)."""

    # -- what the learner reads and sets ----------------------------------------------------------
    @property
    def optimizer(self) -> Any:
        """The core's optimiser."""
        return self.core.optimizer

    @property
    def group(self) -> collective.Collective:
        """The learner group this trainer reduces over."""
        return self.core.group

    @property
    def params(self) -> list[nn.Parameter]:
        """The policy's parameters, in the order the group reduces their gradients."""
        return self.core.params

    @property
    def skipped_updates(self) -> int:
        return self.core.skipped_updates

    @skipped_updates.setter
    def skipped_updates(self, value: int) -> None:
        self.core.skipped_updates = value

    @property
    def lr_scale(self) -> float:
        return self.core.lr_scale

    @lr_scale.setter
    def lr_scale(self, value: float) -> None:
        self.core.lr_scale = value


@dataclass
class Epoch:
    """One epoch's minibatches of a :class:`Minibatches` source: ``shuffled``, this learner's rows in
    the epoch's order; ``spans[i]``, minibatch ``i``'s local rows of it; ``sizes[i]``, its rows
    over the group."""

    shuffled: dict[str, torch.Tensor]
    spans: list[tuple[int, int]]
    sizes: list[int]
    source: Minibatches

    def held(self, i: int) -> bool:
        """Whether this learner holds any row of minibatch ``i``."""
        lo, hi = self.spans[i]
        return hi > lo

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], int, int]]:
        """``(minibatch, its index, its rows over the group)``; the minibatch's columns are views,
        one split per column and epoch (the spans are consecutive)."""
        cuts = [hi for _, hi in self.spans[:-1]]
        chunks = {k: torch.tensor_split(v, cuts, dim=self.source.row_dim(k)) for k, v in self.shuffled.items()}
        for i, size in enumerate(self.sizes):
            yield {k: c[i] for k, c in chunks.items()}, i, size


class Minibatches:
    """Epochs over a prepared batch, flat or by sequence.

    Flat (``sequences=False``): every column is ``[R, ...]`` with ``R = T * N`` step rows (global
    row ``t * N_global + env``). By sequence: columns are ``[T, N, ...]`` and a row is an env's
    whole sequence (dim 1), except the ``env_major`` columns ``[N, ...]`` (e.g. initial recurrent
    states), whose rows are dim 0. Each epoch draws a permutation of the group's rows (the same on
    every learner: same seed, same RNG use), keeps this learner's rows in that order (one gather
    per column) and cuts it into ``ceil(R / num_minibatches)``-row minibatches."""

    def __init__(self, data: dict[str, torch.Tensor], shard: collective.Shard, num_minibatches: int,
                 sequences: bool = False, env_major: Sequence[str] = ()):
        self.data, self.shard, self.sequences, self.env_major = data, shard, sequences, tuple(env_major)
        self.rows = shard.global_envs if sequences else shard.global_envs * shard.T
        self.size = math.ceil(self.rows / min(num_minibatches, self.rows))
        self.device = next(iter(data.values())).device

    def row_dim(self, name: str) -> int:
        """The dim of column ``name`` that holds its rows."""
        return 1 if self.sequences and name not in self.env_major else 0

    def take(self, name: str, x: torch.Tensor, idx: torch.Tensor | slice) -> torch.Tensor:
        """Rows ``idx`` of column ``name`` (along :meth:`row_dim`). A permutation's gather is
        ``index_select``: on the CPU it takes a quarter to a third of the time of ``x[idx]``'s
        advanced indexing for the same rows."""
        if isinstance(idx, slice):
            return x[:, idx] if self.row_dim(name) else x[idx]
        return x.index_select(self.row_dim(name), idx)

    def epoch(self) -> Epoch:
        """A fresh permutation of the group's rows, this learner's rows gathered in its order."""
        R, size = self.rows, self.size
        perm = torch.randperm(R, device=self.device)
        local, bounds = self.shard.localize(perm, self.sequences)
        shuffled = {k: self.take(k, v, local) for k, v in self.data.items()}
        starts = range(0, R, size)
        spans = [(bounds(a), bounds(min(a + size, R))) for a in starts]
        return Epoch(shuffled, spans, [min(a + size, R) - a for a in starts], self)

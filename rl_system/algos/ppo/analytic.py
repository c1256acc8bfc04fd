"""PPO's minibatch gradients in closed form for the built-in feedforward actor-critic.

A small MLP's update is dispatch-bound on a CPU: CartPole's 64×64 actor and critic do about
27 MFLOP per 512-row minibatch step, a millisecond of arithmetic at most, yet an eager step runs
~200 ATen calls for the loss and its backward (~550 counting the calls they make) and walks
~47 autograd nodes, and a whole step takes 1.6 ms. :class:`AnalyticGrad` computes the same
loss's gradients with ~110 calls (~335) and no autograd graph:
the forward keeps each layer's output, the loss's derivative with respect to the heads' outputs is
written out, and the backward is two matrix products and one activation derivative per layer.
It is the math of :meth:`PPO._losses <rl_system.algos.ppo.trainer.PPO._losses>` and autograd's
conventions where they matter (``torch.maximum`` splits a tie's gradient evenly; ``clamp`` passes
the gradient on its bounds), so the gradients agree with autograd's to float32 rounding
(``tests/algos/test_ppo_analytic.py``), not bit for bit: the sums run in another order.

It serves :class:`~rl_system.algos.ppo.policy.ActorCritic` with flat observations only (no
encoder with weights), ``tanh`` / ``relu`` / ``elu`` heads, Discrete or Box actions (with or
without an action mask), outside autocast; :func:`unsupported` says why anything else is not,
and the trainer then uses autograd.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait

import torch
from torch import nn

from rl_system import openmp
from rl_system.algos import layouts
from rl_system.algos.activations import Tanh, inplace_activation
from rl_system.algos.ppo import columns as col
from rl_system.algos.ppo.policy import ActorCritic
from rl_system.algos.surrogate import policy_row_grads, value_row_grads
from rl_system.device import usable_cores
from rl_system.envs.base import ACTION_MASK
from rl_system.rollout.contract import observations

_ACTIVATIONS = (Tanh, nn.Tanh, nn.ReLU, nn.ELU)


def unsupported(policy: nn.Module) -> str | None:
    """Why :class:`AnalyticGrad` cannot serve ``policy`` (None: it can)."""
    if type(policy) is not ActorCritic:
        return f"the policy is {type(policy).__name__}, not the built-in feedforward ActorCritic"
    if policy.multi:
        return "MultiDiscrete actions"
    if any(True for _ in policy.encoders.parameters()):
        return "an observation encoder with weights (conv or embedding)"
    covered = set() if policy.discrete else {id(policy.log_std)}
    for name, head in (("actor", policy.actor), ("critic", policy.critic)):
        for layer in head:
            if not isinstance(layer, (nn.Linear, *_ACTIVATIONS)):
                return f"a {type(layer).__name__} layer in the {name}"
            if isinstance(layer, nn.Linear):
                if layer.bias is None:
                    return f"a Linear layer without bias in the {name}"
                covered.update((id(layer.weight), id(layer.bias)))
    if any(id(p) not in covered for p in policy.parameters()):
        return "parameters outside the actor and critic MLPs"
    return None


class _MLP:
    """One head (``nn.Sequential`` of Linear layers, each but the last followed by an activation)
    with a forward that keeps every layer's output and the backward that turns the output's
    gradient into the weights' gradients.

    Each layer is held as its tensors (weight, bias, and the views of the gradient buffer their
    gradients go to) and its activation's in-place forward and backward, looked up once: a
    minibatch step then makes no module calls or attribute lookups (30 of those a step for
    CartPole's two heads). Like :class:`AnalyticGrad`'s gradient views, this holds the parameters
    themselves, which optimiser steps and ``load_state_dict`` change in place."""

    def __init__(self, head: nn.Sequential, grad_of: dict[int, torch.Tensor]):
        modules = list(head)
        # (weight, bias, weight's gradient, bias's gradient, in-place activation | None, its backward | None)
        self.layers: list[tuple] = []
        for i, m in enumerate(modules):
            if isinstance(m, nn.Linear):
                nxt = modules[i + 1] if i + 1 < len(modules) else None
                act = nxt if isinstance(nxt, _ACTIVATIONS) else None
                self.layers.append((m.weight, m.bias, grad_of[id(m.weight)], grad_of[id(m.bias)],
                                    None if act is None else inplace_activation(act),
                                    None if act is None else _activation_backward(act)))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``[x, h_1, ..., out]``: the input ``[B, D]`` and each layer's output (after its
        activation, applied in place to the fresh product), the last ``[B, n_out]``."""
        outs = [x]
        for weight, bias, _, _, act, _ in self.layers:
            x = torch.addmm(bias, x, weight.t())
            if act is not None:
                x = act(x)
            outs.append(x)
        return outs

    def backward(self, outs: list[torch.Tensor], grad: torch.Tensor) -> None:
        """Writes each weight's gradient from ``grad [B, n_out]``, the loss's gradient at the output."""
        for i in range(len(self.layers) - 1, -1, -1):
            weight, _, weight_grad, bias_grad, _, act_backward = self.layers[i]
            if act_backward is not None:
                grad = act_backward(grad, outs[i + 1])
            layouts.weight_grad(grad, outs[i], weight_grad)
            torch.sum(grad, 0, out=bias_grad)
            if i:
                grad = grad.mm(weight)


def _activation_backward(act: nn.Module):
    """The activation's derivative from its output ``y``, ``(grad, y) -> grad``, as autograd's own
    backward kernels compute it."""
    if isinstance(act, (Tanh, nn.Tanh)):
        return torch.ops.aten.tanh_backward
    if isinstance(act, nn.ReLU):
        return lambda grad, y: torch.ops.aten.threshold_backward(grad, y, 0)
    alpha = act.alpha
    return lambda grad, y: torch.ops.aten.elu_backward(grad, alpha, 1.0, 1.0, True, y)


class AnalyticGrad:
    """The PPO loss of one minibatch and its gradients, without autograd (see the module text).

    :meth:`step` is the drop-in for ``loss, sums = trainer._losses(...); loss.backward()``, and
    :meth:`clip_grad_norm` for ``nn.utils.clip_grad_norm_``: every parameter's ``.grad`` is a view
    of one flat buffer, so the norm and the clipping are one op each where the per-tensor ones
    are ~90."""

    def __init__(self, policy: ActorCritic, cfg, head_threads: int | str = 1):
        self.policy, self.cfg = policy, cfg
        self.head_threads = head_threads  # learner.head_threads; resolved at the first step
        self._pool: ThreadPoolExecutor | None = None
        self._auto: bool | None = None  # whether head_threads was auto (None: not resolved yet)
        self.threads_last_step = 1  # what train/closed_form_threads reports
        self.params = list(policy.parameters())
        first = self.params[0]
        self.grad_buffer = torch.zeros(sum(p.numel() for p in self.params), dtype=first.dtype, device=first.device)
        self.grad_views, offset = [], 0
        for p in self.params:
            self.grad_views.append(self.grad_buffer[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        grad_of = {id(p): view for p, view in zip(self.params, self.grad_views)}
        self.actor, self.critic = _MLP(policy.actor, grad_of), _MLP(policy.critic, grad_of)

    def _attach_grads(self) -> None:
        """Point every ``.grad`` at its view of the buffer (again after ``zero_grad(set_to_none=True)``)."""
        for p, view in zip(self.params, self.grad_views):
            if p.grad is not view:
                p.grad = view

    @torch.no_grad()
    def clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """``nn.utils.clip_grad_norm_`` over the buffer: scales the gradients to a global norm of
        at most ``max_norm``; returns the norm before clipping."""
        norm = torch.linalg.vector_norm(self.grad_buffer)
        self.grad_buffer.mul_((max_norm / (norm + 1e-6)).clamp(max=1.0))
        return norm

    @torch.inference_mode()
    def step(self, mb: dict[str, torch.Tensor], rows: int, adv: torch.Tensor) -> torch.Tensor:
        """Sets every parameter's ``.grad`` to the gradient of the minibatch loss (this learner's
        ``mb``, ``rows`` loss rows over the group) and returns the sums of the minibatch
        statistics ``[pg, v, entropy, approx_kl, clipped]``. ``adv [B]``: normalised advantages.

        The actor's and the critic's parts share nothing but the encoded observations, so with a
        second thread (:attr:`head_threads`) the critic's runs there while the actor's runs here."""
        policy, cfg = self.policy, self.cfg
        self._attach_grads()
        obs = observations(mb)
        xa, xc = policy.encode(obs)
        scale = 1.0 / rows  # the loss is (pg - ent_coef * ent + vf_coef * v) / rows
        pool = self._critic_thread(adv.shape[0])
        critic = pool.submit(self._critic_part, xc, mb, scale) if pool is not None else None
        self.threads_last_step = 1 if pool is None else 2
        try:
            acts = self.actor.forward(xa)
            if policy.discrete:
                mask = obs.get(ACTION_MASK)
                logp, entropy, backward = _categorical(policy.masked_log_probs(acts[-1], obs), mb[col.ACTION], mask)
            else:
                logp, entropy, backward = _gaussian(policy, acts[-1], mb[col.ACTION])
            pg, kl, clipped, d_logp = policy_row_grads(logp - mb[col.LOGP], adv, cfg.clip_coef, mb.get(col.IS_WEIGHT))
            ent = entropy.sum()
            self.actor.backward(acts, backward(d_logp * scale, -cfg.ent_coef * scale))
        finally:  # the critic's writes end before this step returns, whatever happened here
            if critic is not None:
                wait([critic])
        v = critic.result() if critic is not None else self._critic_part(xc, mb, scale)
        return torch.stack([pg, v, ent, kl, clipped])

    def _critic_part(self, xc: torch.Tensor, mb: dict[str, torch.Tensor], scale: float) -> torch.Tensor:
        """The critic's forward from its features ``xc [B, F]``, its value loss's row gradients and
        its backward; returns the value loss's sum. Inference mode is per thread, so it is entered here."""
        with torch.inference_mode():
            vals = self.critic.forward(xc)
            vclip = self.cfg.clip_coef if self.cfg.clip_vloss else None
            v, d_value = value_row_grads(vals[-1].squeeze(-1), mb[col.VALUE], mb[col.RETURN], vclip)
            self.critic.backward(vals, (d_value * (self.cfg.vf_coef * scale)).unsqueeze(-1))
            return v

    def _critic_thread(self, rows: int) -> ThreadPoolExecutor | None:
        """The critic's thread for a step of ``rows`` rows, or None: where ``head_threads`` is 2,
        or ``auto`` resolves to 2 (decided at the first step, once the learner's intra-op threads
        are set) and the step has :data:`TWO_HEADS_MIN_ROWS` rows."""
        if self._auto is None:
            self._auto = self.head_threads == "auto"
            self.head_threads = resolve_head_threads(self.head_threads, self.grad_buffer.device)
            if self.head_threads == 2:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="closed-form-critic")
        if self._pool is None or (self._auto and rows < TWO_HEADS_MIN_ROWS):
            return None
        return self._pool


TWO_HEADS_MIN_ROWS = 4096
"""Rows a closed-form step needs before ``head_threads: auto`` runs the critic on its own thread:
the ops must be large enough to outweigh the threads' hand-offs and their turns at Python's
lock. CartPole's [32, 32] update on an idle 2-core VM: 1.31x as fast at 4,096 rows, 1.08x and
0.91x at 2,048 in two sittings, 0.90x and 0.86x at 1,024 (``python -m bench.bench_update --alternate
learner.head_threads=1 learner.head_threads=2 ...``; docs/lab/results.md, 2026-12-08)."""


def resolve_head_threads(requested: int | str, device: torch.device) -> int:
    """``learner.head_threads``: ``auto`` is 2 on the CPU where torch computes on one intra-op
    thread, this process may use two cores or more, and the machine was idle when the run
    started (:func:`rl_system.openmp.threads_may_spin`; beside a busy process the second thread
    costs 7%); else 1. Two OpenMP teams side by side would fight for the cores, hence one intra-op thread."""
    if requested != "auto":
        return int(requested)
    alone = device.type == "cpu" and torch.get_num_threads() == 1 and usable_cores() >= 2
    return 2 if alone and openmp.threads_may_spin() else 1


def _categorical(logp_all: torch.Tensor, action: torch.Tensor, mask: torch.Tensor | None):
    """``(logp [B], entropy [B], backward)`` of a Discrete head from its masked log-probabilities
    ``logp_all [B, n]`` (:meth:`ActorCritic.masked_log_probs`); ``backward(d_logp [B], d_ent)`` is the
    gradient at the logits of ``d_logp · logp + d_ent · entropy`` (``d_ent`` a float: the same for
    every row), zero at the masked logits."""
    probs = logp_all.exp()
    index = action.long().unsqueeze(-1)
    logp = logp_all.gather(-1, index).squeeze(-1)
    plogp = probs * logp_all
    entropy = -plogp.sum(-1)

    def backward(d_logp: torch.Tensor, d_ent: float) -> torch.Tensor:
        # d logp_a / dz = onehot(a) - p;  d H / dz = -p * (log p + H) = -(p log p) - p * H.
        grad = probs * (-d_logp).unsqueeze(-1)
        grad.scatter_add_(-1, index, d_logp.unsqueeze(-1))
        if d_ent:
            grad -= d_ent * (plogp + probs * entropy.unsqueeze(-1))
        if mask is not None:
            grad.masked_fill_(~mask, 0.0)
        return grad

    return logp, entropy, backward


def _gaussian(policy: ActorCritic, mean: torch.Tensor, action: torch.Tensor):
    """``(logp [B], entropy [B], backward)`` of the policy's diagonal Gaussian head (``mean [B, D]``,
    the state-independent ``log_std [D]``); ``backward`` returns the gradient at ``mean`` and sets
    ``log_std.grad``."""
    log_std, action = policy.log_std, action.reshape(mean.shape)
    logp, entropy = policy._gauss_logp(action, mean), policy.gauss_entropy(mean.shape[0])
    inv_std = torch.exp(-log_std)
    z = (action - mean) * inv_std  # as _gauss_logp's

    def backward(d_logp: torch.Tensor, d_ent: float) -> torch.Tensor:
        # d logp / d mean = z / std;  d logp / d log_std = z^2 - 1;  d H / d log_std = 1 per row.
        d = d_logp.unsqueeze(-1)
        torch.sum(d * (z.square() - 1), 0, out=log_std.grad).add_(d_ent * mean.shape[0])
        return d * z * inv_std

    return logp, entropy, backward

"""The PPO trainer (learner side): PPO (Schulman et al. 2017) with the implementation details
of CleanRL's ``ppo.py``: GAE, advantage normalisation per minibatch, clipped surrogate, clipped
value loss, entropy bonus, global gradient-norm clipping, linear learning-rate annealing, and
optionally SB3 ``VecNormalize``-style reward scaling (``ppo.normalize_reward``: rewards divided
by the running std of the discounted return, which the sampler ships as ``disc_return``).

Batch layout: the learner joins the rollouts of a round along the env axis
(:func:`rl_system.rollout.contract.concat`), so every step column is ``[T, N, ...]`` with ``N`` the total
number of envs of the round; the columns are those of :class:`~.buffer.RolloutBuffer`.

Recurrent policies (:class:`~rl_system.algos.protocols.RecurrentActorCriticNetwork`): a minibatch
is a random set of whole env sequences ``[T, B]``, replayed from the shipped ``init_state`` with
the state zeroed where an episode began (BPTT over the rollout, as CleanRL's LSTM PPO and
sb3-contrib's RecurrentPPO do); the first ``ppo.burn_in`` steps only warm the state.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator

import torch
from torch import nn

from rl_system import collective
from rl_system.algos.advantages import compute_gae, compute_vtrace
from rl_system.algos.compiled import CompiledOrEager
from rl_system.algos.ppo import analytic
from rl_system.algos.ppo import columns as col
from rl_system.algos.ppo.config import PPOConfig
from rl_system.algos.ppo.policy import RunningNorm
from rl_system.algos.protocols import is_recurrent
from rl_system.algos.recurrent import episode_starts
from rl_system.algos.surrogate import PPO_STATS, actor_critic_loss, ppo_sums
from rl_system.algos.update import Epoch, Minibatch, Minibatches, OptimizerSpec, Trainer, UpdateCore
from rl_system.rollout.contract import OBS, observations


class PPO(Trainer):
    """A :class:`~rl_system.algos.protocols.Trainer`: the round's preparation (GAE or V-trace) and
    the clipped-surrogate loss (or its closed-form gradients) on the shared update core
    (:mod:`rl_system.algos.update`).

    In a learner group (:mod:`rl_system.collective`) ``batch`` is this learner's envs of the
    round; the epochs still walk the global batch: every learner draws the same permutation of
    the global rows (same seed, same RNG use), takes the rows it holds of each minibatch and
    sums its losses over them, divided by the global minibatch size; the all-reduced gradients
    are then exactly the one-learner gradients of the whole minibatch."""

    stat_names = PPO_STATS

    def __init__(self, policy: nn.Module, cfg: PPOConfig, compile: bool = False,  # noqa: A002 - the config key's name
                 gradients: str = "autograd", group: collective.Collective = collective.SOLO,
                 head_threads: int | str = 1):
        self.policy, self.cfg = policy, cfg
        self.core = UpdateCore(policy.parameters(), OptimizerSpec(lr=cfg.lr), anneal_lr=cfg.anneal_lr,
                               max_grad_norm=cfg.max_grad_norm, group=group)
        self.num_epochs, self.target_kl = cfg.num_epochs, cfg.target_kl
        device = next(policy.parameters()).device
        # Running variance of the discounted return; the learner's alone (workers ship raw rewards).
        self.return_norm = RunningNorm(1).to(device) if cfg.normalize_reward else None
        self.recurrent = is_recurrent(policy)
        self.observe_round = RoundObserver(policy)
        self.rho_stats: dict[str, float] = {}  # V-trace's importance weights in the last update
        self.loss_fn = CompiledOrEager(self._losses) if compile else self._losses
        self.closed_form = self._closed_form(gradients, head_threads)
        self._report_closed_form = gradients == "closed_form"
        self._closed_form_ran = False  # in the current update

    def _closed_form(self, gradients: str, head_threads: int | str) -> analytic.AnalyticGrad | None:
        """The closed-form gradients where ``learner.gradients`` asks for them and the policy allows
        (on ``learner.head_threads``)."""
        if gradients != "closed_form":
            return None
        reason = analytic.unsupported(self.policy)
        if reason is None:
            return analytic.AnalyticGrad(self.policy, self.cfg, head_threads)
        warnings.warn(f"learner.gradients: closed_form cannot serve this policy ({reason}); the update uses "
                      f"autograd", stacklevel=3)
        return None

    def extra_state(self) -> dict:
        """The reward-scaling statistics, where ``ppo.normalize_reward``."""
        return {} if self.return_norm is None else {"return_norm": self.return_norm.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        if self.return_norm is not None and "return_norm" in state:
            self.return_norm.load_state_dict(state["return_norm"])

    def scaled_reward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[T, N]`` rewards, divided by the running std of the discounted return (updated with
        this batch's ``disc_return`` first, as SB3 does) and clipped, where ``normalize_reward``."""
        if self.return_norm is None:
            return batch[col.REWARD]
        if col.DISC_RETURN not in batch:
            raise ValueError("ppo.normalize_reward needs the samplers' disc_return column")
        self.return_norm.update(batch[col.DISC_RETURN].reshape(-1, 1), self.group)
        std = (self.return_norm.var + 1e-8).sqrt().to(batch[col.REWARD].dtype)
        clip = self.cfg.reward_clip
        return (batch[col.REWARD] / std).clamp(-clip, clip)

    def prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Adds advantages and returns, then flattens ``[T, N, ...]`` to ``[T*N, ...]``
        (recurrent policies: keeps ``[T, N, ...]`` and adds ``reset`` and ``init_state``)."""
        cfg = self.cfg
        done = batch[col.TERMINATED] | batch[col.TRUNCATED]
        # trunc_value is V(final_obs), already in the (scaled) units the critic learns.
        reward = self.scaled_reward(batch) + cfg.gamma * batch[col.TRUNC_VALUE]
        adv, ret = compute_gae(reward, batch[col.VALUE], done, batch[col.LAST_VALUE], cfg.gamma, cfg.gae_lambda)
        data = {k: v for k, v in batch.items() if k.startswith(OBS)}
        data.update({col.ACTION: batch[col.ACTION], col.LOGP: batch[col.LOGP], col.VALUE: batch[col.VALUE],
                     col.ADVANTAGE: adv, col.RETURN: ret})
        proximal = cfg.ratio_anchor == "proximal"
        if cfg.value_target == "vtrace" or proximal:
            prox_logp = self._proximal_logp(batch, done)
            log_rho = prox_logp - batch[col.LOGP]
            rho = log_rho.exp()
            self.rho_stats = {}
        if cfg.value_target == "vtrace":
            data[col.RETURN] = compute_vtrace(reward, batch[col.VALUE], done, batch[col.LAST_VALUE], log_rho, cfg.gamma,
                                         cfg.gae_lambda, cfg.vtrace_rho_bar, cfg.vtrace_c_bar)
            self.rho_stats.update(_rho_stats("vtrace", rho, cfg.vtrace_rho_bar))
        if proximal:
            # The decoupled objective: clip around the policy the update starts from and weight
            # each row by pi / mu.
            data[col.LOGP] = prox_logp
            bar = cfg.proximal_rho_bar
            data[col.IS_WEIGHT] = rho if bar is None else rho.clamp(max=bar)
            self.rho_stats.update(_rho_stats("proximal", rho, bar))
        if self.recurrent:
            data.update({col.RESET: episode_starts(done), col.INIT_STATE: batch[col.INIT_STATE]})
            return data
        return {k: v.flatten(0, 1) for k, v in data.items()}

    @torch.no_grad()
    def _proximal_logp(self, batch: dict[str, torch.Tensor], done: torch.Tensor) -> torch.Tensor:
        """``[T, N]`` log-probabilities of the batch's actions under the policy as it is now (before
        this update's epochs; the batch's ``logp`` column is the sampling policy's): one forward
        pass over the batch."""
        obs = observations(batch)
        if self.recurrent:
            logp, _, _ = self.policy.evaluate_sequence(obs, batch[col.ACTION], batch[col.INIT_STATE], episode_starts(done))
        else:
            T, N = batch[col.LOGP].shape
            flat = {k: v.flatten(0, 1) for k, v in obs.items()}
            logp, _, _ = self.policy.evaluate(flat, batch[col.ACTION].flatten(0, 1))
            logp = logp.reshape(T, N)
        return logp

    def epochs_context(self, data: dict[str, torch.Tensor]) -> torch.inference_mode:
        """With closed-form gradients nothing needs autograd: the epochs run in inference mode."""
        self._closed_form_ran = False
        return torch.inference_mode(self._closed_form_serves(data[col.LOGP]))

    def epochs(self, data: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]
               ) -> Callable[[], Iterator[Minibatch]]:
        """Feedforward: minibatches of steps; recurrent: of whole env sequences (dim 1), whose loss
        rows are their steps after ``burn_in``."""
        cfg = self.cfg
        shard = collective.Shard.of(batch[col.REWARD].shape, self.group)
        source = Minibatches(data, shard, cfg.num_minibatches, sequences=self.recurrent, env_major=(col.INIT_STATE,))
        seq_rows = shard.T - cfg.burn_in if self.recurrent else 1  # loss rows per minibatch entry
        return lambda: self._epoch(source, seq_rows)

    def _epoch(self, source: Minibatches, seq_rows: int) -> Iterator[Minibatch]:
        """One epoch; each minibatch carries its advantage statistics over the group (``extra``)."""
        epoch = source.epoch()
        adv_stats = self._advantage_stats(source, epoch)
        for mb, i, size in epoch:
            yield Minibatch(mb, size * seq_rows, adv_stats[i], held=epoch.held(i))

    def round_metrics(self, batch: dict[str, torch.Tensor], data: dict[str, torch.Tensor]) -> dict[str, float]:
        """Feeds the round's observations to the network's ``observe`` (after the epochs, so the
        first minibatch's ratio is exactly 1); the importance weights' statistics, which loss
        path ran, the critic's explained variance."""
        self.observe_round(batch, self.group)
        metrics = dict(self.rho_stats)
        if isinstance(self.loss_fn, CompiledOrEager):
            metrics["compiled"] = float(self.loss_fn.compiled)
        if self._report_closed_form:
            metrics["closed_form"] = float(self._closed_form_ran)
            if self._closed_form_ran:  # the threads its last step ran on (learner.head_threads)
                metrics["closed_form_threads"] = float(self.closed_form.threads_last_step)
        explained = self.group.explained_variance(data[col.VALUE].flatten(), data[col.RETURN].flatten())
        metrics.update(explained_variance=explained)
        return metrics

    def _advantage_stats(self, source: Minibatches, epoch: Epoch) -> list[tuple | None]:
        """Per minibatch of ``epoch``: the mean and standard deviation of the whole minibatch's
        advantages over the group, for every minibatch of an epoch in one all-reduce (None for one
        learner: each minibatch takes its own)."""
        if self.group.world == 1 or not self.cfg.norm_adv:
            return [None] * len(epoch.spans)
        adv = epoch.shuffled[col.ADVANTAGE]
        sums = torch.zeros(len(epoch.spans), 3, dtype=torch.float64, device=adv.device)
        for i, (lo, hi) in enumerate(epoch.spans):
            a = source.take(col.ADVANTAGE, adv, slice(lo, hi))
            a = a[self.cfg.burn_in:] if self.recurrent else a  # the rows the losses see
            a = a.double()
            sums[i, 0], sums[i, 1], sums[i, 2] = a.numel(), a.sum(), a.square().sum()
        count, total, squares = self.group.all_reduce(sums).unbind(1)
        mean = total / count.clamp(min=1)
        var = (squares - count * mean.square()).clamp(min=0) / (count - 1).clamp(min=1)
        return list(zip(mean.float().tolist(), var.sqrt().float().tolist()))

    def _losses(self, mb: dict[str, torch.Tensor], rows: int, adv_stats: tuple | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, sums)`` over this learner's rows of a minibatch of ``rows`` loss rows in all:
        the loss (its share of the global minibatch mean, differentiable) and the sums of the
        minibatch statistics :data:`PPO_STATS` (no grad). ``adv_stats``: the minibatch's advantage
        mean and std over the group (None: of ``mb``, one learner)."""
        cfg = self.cfg
        if self.recurrent:
            new_logp, entropy, new_value = self.policy.evaluate_sequence(observations(mb), mb[col.ACTION],
                                                                         mb[col.INIT_STATE], mb[col.RESET])
            # Burn-in steps only warm the state: the losses see steps burn_in.. of each sequence.
            mb = {k: v[cfg.burn_in:].flatten(0, 1) for k, v in mb.items() if k not in (col.INIT_STATE, col.RESET)}
            new_logp, entropy, new_value = (x[cfg.burn_in:].flatten() for x in (new_logp, entropy, new_value))
        else:
            new_logp, entropy, new_value = self.policy.evaluate(observations(mb), mb[col.ACTION])
        adv = self._normalized_advantage(mb[col.ADVANTAGE], rows, adv_stats)
        vclip = cfg.clip_coef if cfg.clip_vloss else None
        pg, v, kl, clip = ppo_sums(new_logp - mb[col.LOGP], adv, new_value, mb[col.VALUE], mb[col.RETURN], cfg.clip_coef, vclip,
                                   mb.get(col.IS_WEIGHT))
        return actor_critic_loss(pg, v, entropy.sum(), cfg.ent_coef, cfg.vf_coef, rows, kl, clip)

    def loss(self, mb: Minibatch) -> tuple[torch.Tensor, torch.Tensor]:
        return self.loss_fn(mb.data, mb.rows, mb.extra)

    def _normalized_advantage(self, adv: torch.Tensor, rows: int, adv_stats: tuple | None) -> torch.Tensor:
        """``adv`` normalised by the minibatch's mean and std (``adv_stats``, over the group; None:
        of ``adv``), where ``ppo.norm_adv``."""
        if not (self.cfg.norm_adv and rows > 1):
            return adv
        mean, std = adv_stats if adv_stats is not None else (adv.mean(), adv.std())
        return (adv - mean) / (std + 1e-8)

    def step(self, mb: Minibatch) -> dict[str, float] | None:
        """One gradient step on ``mb``: by the closed form where it serves (it writes every
        gradient in full and clips them itself), else by autograd (:meth:`Trainer.step`)."""
        if not (mb.held and self._use_closed_form(mb.data[col.LOGP])):
            return super().step(mb)
        closed_form, cfg = self.closed_form, self.cfg
        adv = self._normalized_advantage(mb.data[col.ADVANTAGE], mb.rows, mb.extra)
        return self.core.step(lambda: closed_form.step(mb.data, mb.rows, adv), PPO_STATS, mb.rows,
                              clip=lambda: [closed_form.clip_grad_norm(cfg.max_grad_norm)])

    def _closed_form_serves(self, like: torch.Tensor) -> bool:
        """Whether this update's steps take the closed-form gradients (decided as
        :meth:`_use_closed_form` decides it, without its warning)."""
        return self.closed_form is not None and not torch.is_autocast_enabled(like.device.type)

    def _use_closed_form(self, like: torch.Tensor) -> bool:
        """Whether this step takes the closed-form gradients (they are float32's: a bf16 update
        takes autograd's, with one warning)."""
        if self.closed_form is None:
            return False
        if torch.is_autocast_enabled(like.device.type):
            warnings.warn("learner.gradients: closed_form computes in float32; this bf16 update uses autograd",
                          stacklevel=3)
            self.closed_form = None
            return False
        self._closed_form_ran = True
        return True




def _rho_stats(prefix: str, rho: torch.Tensor, bar: float | None) -> dict[str, float]:
    """The mean importance weight ``pi / mu`` of a batch and the share truncated at ``bar``."""
    stats = {f"{prefix}_rho_mean": float(rho.mean())}
    if bar is not None:
        stats[f"{prefix}_rho_clipped"] = float((rho > bar).float().mean())
    return stats


class RoundObserver:
    """Feeds a round's observations ``[T*N, ...]`` to the network's ``observe`` where it has one
    (e.g. the observation normaliser's statistics; after the update's epochs), over the learner
    group where its ``observe`` takes one: looked up once, not every round."""

    def __init__(self, policy: nn.Module):
        self.observe = getattr(policy, "observe", None)
        self.with_group = takes_group(self.observe)

    def __call__(self, batch: dict[str, torch.Tensor], group: collective.Collective) -> None:
        if self.observe is None:
            return
        obs = {k: v.flatten(0, 1) for k, v in observations(batch).items()}
        if self.with_group:
            self.observe(obs, group)
        else:
            self.observe(obs)


def takes_group(observe) -> bool:
    """Whether a network's ``observe`` takes the learner group as its second argument (networks
    whose ``observe(obs)`` does not keep per-learner statistics in a group)."""
    if observe is None:
        return False
    params = inspect.signature(observe).parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)

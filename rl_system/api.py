"""The Python API: train, load a trained policy and act with it, evaluate, build an env; what the
``rl-system`` commands do, from a script or a notebook (``docs/python_api.md``).

>>> import rl_system
>>> result = rl_system.train("launch/configs/cartpole_ppo.yaml", run_dir="runs/cp")  # doctest: +SKIP
>>> policy = rl_system.load_policy(result.run_dir, pick="best")                      # doctest: +SKIP
>>> action, state = policy.act(obs, deterministic=True)                             # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rl_system.checkpoint.pick import DEFAULT_PICK
from rl_system.config import ConfigError, RunConfig, apply_override, build_config, load_config
from rl_system.run.summary import RunSummary

ConfigLike = str | Path | dict | RunConfig


@dataclass(frozen=True)
class RoundInfo:
    """What a callback is told after each round."""

    round: int
    env_steps: int
    policy_version: int
    mean_return: float | None
    """Mean return of the last ``return_window`` finished episodes (None before the first)."""
    best_return: float | None
    train_s: float
    """Seconds spent in rounds so far (sampling and updating)."""
    train: dict[str, float] = field(default_factory=dict)
    """The trainer's metrics of this round's update (losses, KL, entropy, learning rate ...)."""


Callback = Callable[[RoundInfo], bool | None]
"""Called after every round; returning True stops the run after that round (status ``stopped``)."""


@dataclass(frozen=True)
class TrainResult:
    """A finished run: its figures (``summary`` holds all of ``summary.json``) and where it lies."""

    status: str
    run_dir: Path
    env_steps: int
    rounds: int
    wall_time_s: float
    final_mean_return: float | None
    best_mean_return: float | None
    reached_target: bool
    time_to_target_s: float | None
    steps_to_target: int | None
    best_checkpoint: Path | None
    final_checkpoint: Path | None
    summary: dict[str, Any]


def as_config(config: ConfigLike, overrides: Sequence[str] = ()) -> RunConfig:
    """A :class:`RunConfig` from a YAML path, a nested dict or a config, with ``KEY=VALUE``
    overrides applied (as ``--set``); :class:`ConfigError` (one line naming the key) if invalid."""
    if isinstance(config, (str, Path)):
        return load_config(config, list(overrides))
    if isinstance(config, RunConfig):
        tree = config.model_dump()
    elif isinstance(config, dict):
        tree = {**config}
    else:
        raise ConfigError(f"config: expected a YAML path, a dict or a RunConfig, got {type(config).__name__}")
    for assignment in overrides:
        apply_override(tree, assignment)
    return build_config(tree)


class _Callbacks:
    """The run loop's :class:`~rl_system.run.loop.RoundReporter` for user callbacks."""

    def __init__(self, callbacks: Iterable[Callback]):
        self.callbacks = list(callbacks)
        self.stop_requested = False

    def checkpoint_due(self, steps_before: int, steps_now: int) -> bool:
        return False

    def after_round(self, ctx: Any, checkpointed: bool, last: bool = False) -> None:
        if last:
            return
        st, window = ctx.stats, ctx.window
        info = RoundInfo(round=st.rounds, env_steps=st.env_steps, policy_version=ctx.version,
                         mean_return=window.mean if window.returns else None,
                         best_return=st.best_return if st.best_return > float("-inf") else None,
                         train_s=st.time_round, train=dict(ctx.last_train_metrics))
        for callback in self.callbacks:
            if callback(info):
                self.stop_requested = True


def train(config: ConfigLike, overrides: Sequence[str] = (), run_dir: str | Path | None = None,
          address: str | None = None, resume: str | Path | None = None, callbacks: Iterable[Callback] = (),
          log_level: str = "warning", quiet: bool = False) -> TrainResult:
    """Train as ``rl-system train`` does and return the result.

    ``config``: a YAML path, a dict or a :class:`RunConfig`; ``overrides``: ``KEY=VALUE`` strings.
    ``address``: a Ray cluster to join; default: this process's Ray if one is up, else an embedded
    one started here and stopped at the end. ``resume``: a run directory, a checkpoint file or
    ``"latest"``. ``callbacks``: called with a :class:`RoundInfo` after every round; one returning
    True stops the run. ``log_level``: what the console shows (every level goes to the run's
    ``console.log``); ``quiet``: no progress lines (level ``warning`` whatever ``log_level`` says).
    Raises :class:`ConfigError` for a bad config and :class:`~rl_system.errors.TrainingError` for a
    run that failed (one line each; its subclasses ``ResumeError`` and ``RayStartError`` for a resume
    target or a Ray that are not there)."""
    from rl_system.observe.metrics import console_level

    cfg = as_config(config, overrides)
    summary = run_training(cfg, run_dir=run_dir, address=address, resume=resume, callbacks=callbacks,
                           log_level=console_level(log_level, quiet))
    return _result(summary, cfg)


def run_training(cfg: RunConfig, run_dir: str | Path | None = None, address: str | None = None,
                 resume: str | Path | None = None, callbacks: Iterable[Callback] = (), log_level: str = "warning",
                 clock: Any = None, say: Callable[[str, bool], None] | None = None,
                 on_ray_started: Callable[[], None] | None = None) -> RunSummary:
    """The steps of a run, each timed on ``clock`` (a :class:`~rl_system.run.phases.PhaseClock`): find
    the checkpoint to resume, probe the env and the policy (a config they reject fails here, before
    Ray starts), start or join Ray, run the loop, stop the Ray started here. Returns the run's
    :class:`RunSummary` (what ``summary.json`` holds). ``say(text, warning)`` gets the lines a person
    should see before the run's own (where the run resumes from; a skipped corrupt checkpoint, a
    warning); by default they are printed. ``on_ray_started`` is called once Ray is up (the CLI installs its SIGTERM
    handler there, after Ray's own)."""
    import sys

    import ray

    from rl_system.checkpoint import CheckpointError, find_resume
    from rl_system.errors import RayStartError, ResumeError, one_line
    from rl_system.run.loop import RunLoop
    from rl_system.run.phases import PhaseClock
    from rl_system.run.startup import check_embedded_placement, init_ray, probe_specs, shutdown_ray

    clock = clock or PhaseClock()
    state, out_dir = None, Path(run_dir) if run_dir is not None else None
    if resume is not None:
        try:
            found = find_resume(str(resume), cfg, out_dir)
        except CheckpointError as err:
            raise ResumeError(f"cannot resume: {err}") from None
        say = say or (lambda text, warning=False: print(text, file=sys.stderr if warning else sys.stdout))
        for name, why in found.skipped:
            say(f"skipped corrupt checkpoint {name}: {why}", True)
        say(f"resuming from {found.path}", False)
        state, out_dir = found.state, found.run_dir or out_dir
    ours = not ray.is_initialized()  # else a caller's Ray (a notebook's, main() called in-process)
    with clock.phase("probe"):
        specs = probe_specs(cfg)
        if ours and address is None:
            check_embedded_placement(cfg)  # a GPU this machine does not have: one line, before Ray
    try:
        if ours:
            with clock.phase("ray_init"):
                try:
                    init_ray(cfg, address)
                except KeyboardInterrupt:
                    raise
                except Exception as err:  # noqa: BLE001 - Ray raises a bare Exception when its node times out
                    raise RayStartError(f"cannot start or join Ray ({address or 'local'}): {one_line(err)}") from None
        if on_ray_started is not None:
            on_ray_started()
        reporter = _Callbacks(callbacks) if callbacks else None
        return RunLoop(cfg, out_dir, resume_state=state, specs=specs, log_level=log_level,
                       reporter=reporter, clock=clock).run(address)
    finally:
        if ours:
            with clock.phase("ray_shutdown"):
                shutdown_ray()


def _result(summary: RunSummary, cfg: RunConfig) -> TrainResult:
    from rl_system.checkpoint import CheckpointStore
    from rl_system.run.storage import checkpoint_root

    run_dir = Path(summary.run_dir)
    best = CheckpointStore(checkpoint_root(cfg, run_dir), clean=False).best_path()
    final = summary.checkpoints.last_path
    return TrainResult(
        status=summary.status, run_dir=run_dir, env_steps=summary.env_steps, rounds=summary.rounds,
        wall_time_s=summary.wall_time_s, final_mean_return=summary.final_mean_return,
        best_mean_return=summary.best_mean_return, reached_target=summary.reached_target,
        time_to_target_s=summary.time_to_target_s, steps_to_target=summary.steps_to_target,
        best_checkpoint=Path(best) if best else None, final_checkpoint=Path(final) if final else None,
        summary=summary.to_json())


class Policy:
    """A trained policy, for acting outside the system: ``act(obs, state=None, deterministic=False)``
    on a batch of observations, as numpy arrays or torch tensors (a dict for dict observations,
    or one array for a single-key observation space). Observation normalisation is inside the
    network; a recurrent policy takes and returns its state (``None`` starts every episode)."""

    def __init__(self, network: torch.nn.Module, cfg: RunConfig, obs_spec: dict[str, Any], version: int, path: str):
        self.network, self.cfg, self.obs_spec = network, cfg, obs_spec  # key -> TensorSpec (shape, dtype)
        self.obs_keys = list(obs_spec)
        self.version, self.path = version, path
        self.recurrent = hasattr(network, "initial_state")

    def __repr__(self) -> str:
        return f"Policy({self.cfg.algo} on {self.cfg.env.name}, version {self.version}, from {self.path})"

    def _obs(self, obs: Any) -> tuple[dict[str, torch.Tensor], bool]:
        numpy = not isinstance(obs, torch.Tensor) and not (isinstance(obs, dict) and obs and
                                                            isinstance(next(iter(obs.values())), torch.Tensor))
        if not isinstance(obs, dict):
            if len(self.obs_keys) != 1:
                raise ValueError(f"this policy observes {self.obs_keys}: pass a dict of those keys")
            obs = {self.obs_keys[0]: obs}
        missing = set(self.obs_keys) - set(obs)
        if missing:
            raise ValueError(f"observation keys missing: {sorted(missing)} (the policy observes {self.obs_keys})")
        device = next(self.network.parameters()).device
        return {k: torch.as_tensor(obs[k], device=device) for k in self.obs_keys}, numpy

    @torch.no_grad()
    def act(self, obs: Any, state: Any = None, deterministic: bool = False) -> tuple[Any, Any]:
        """``(action, state)`` for a batch ``obs`` (leading axis: the batch); ``state`` is None for
        a feedforward policy. numpy in, numpy out; torch in, torch out."""
        tensors, numpy = self._obs(obs)
        batch = next(iter(tensors.values())).shape[0]
        if self.recurrent:
            s = self.network.initial_state(batch) if state is None else torch.as_tensor(state)
            action, _, _, new_state = self.network.act(tensors, s, deterministic)
        else:
            action, _, _ = self.network.act(tensors, deterministic)
            new_state = None
        if numpy:
            return action.cpu().numpy(), None if new_state is None else new_state.cpu().numpy()
        return action, new_state


def _find_checkpoint(run_or_checkpoint: str | Path, pick: str, doing: str) -> Any:
    """The checkpoint ``pick`` names (:func:`rl_system.checkpoint.pick_checkpoint`, as ``--pick``),
    loaded; :class:`ValueError` (one line, ``cannot <doing> <path>: why``) otherwise."""
    from rl_system.checkpoint import CheckpointError, pick_checkpoint

    try:  # a pick that names no choice: pick_checkpoint's own one-line ValueError
        return pick_checkpoint(run_or_checkpoint, pick)
    except CheckpointError as err:
        raise ValueError(f"cannot {doing} {run_or_checkpoint}: {err}") from None


def load_policy(run_or_checkpoint: str | Path, pick: str = DEFAULT_PICK, device: str = "cpu") -> Policy:
    """The policy of a run directory, its checkpoints directory or one checkpoint file. ``pick``
    as ``--pick`` (:mod:`rl_system.checkpoint.pick`): ``best`` (the best training mean return,
    else the latest), ``latest`` (the newest; ``final`` is the same) or ``v<N>``. PPO and
    multi-agent PPO policies (a multi-agent policy acts for all agents at once: ``[B, n, ...]``);
    :class:`ValueError` (one line) for a file that is not a checkpoint of one."""
    from rl_system.algos import load_policy as _load_network
    from rl_system.algos.registry import get_spec, having
    from rl_system.algos.spec import ACTING_POLICY
    from rl_system.checkpoint import keys

    found = _find_checkpoint(run_or_checkpoint, pick, "load a policy from")
    state = found.state
    if keys.CONFIG not in state or keys.LEARNER not in state:
        raise ValueError(f"{found.path} is not a policy checkpoint (no config or learner state)")
    cfg = RunConfig.model_validate(state[keys.CONFIG])
    if not get_spec(cfg.algo).has(ACTING_POLICY):
        raise ValueError(f"{found.path}: load_policy acts with {', '.join(having(ACTING_POLICY))} policies; this one is "
                         f"{cfg.algo!r} (use rl_system.evaluate for it)")
    env = make_env(cfg.env.name, 1, "cpu", seed=0, **cfg.env.test_kwargs())
    try:
        network = _load_network(state, env, device)
        obs_spec = dict(env.observation_spec)
    finally:
        env.close()
    return Policy(network, cfg, obs_spec, int(state[keys.LEARNER].get(keys.VERSION, -1)), str(found.path))


def evaluate(run_or_checkpoint: str | Path, episodes: int = 100, deterministic: bool = False, pick: str = DEFAULT_PICK,
             num_envs: int | None = None, seed: int = 12345, device: str = "cpu") -> dict[str, Any]:
    """As ``rl-system eval`` (the same options under the same names and defaults): mean and std of
    return and length, each outcome's rate, over ``episodes`` episodes of the checkpoint's env
    (its ``env.eval_kwargs``). ``pick`` as in :func:`load_policy`."""
    from rl_system.policy.evaluation import evaluate as _evaluate

    if episodes < 1:  # as eval's --episodes, before the checkpoint is read
        raise ValueError(f"episodes: expected a positive number, got {episodes}")
    found = _find_checkpoint(run_or_checkpoint, pick, "evaluate")
    return {**_evaluate(found.state, episodes=episodes, deterministic=deterministic, num_envs=num_envs, seed=seed,
                        device=device), "checkpoint": found.path}


def export(run_or_checkpoint: str | Path, format: str, out: str | Path, pick: str = DEFAULT_PICK,  # noqa: A002
           agent: int | None = None) -> Path:
    """As ``rl-system export``: the policy as a TorchScript or ONNX file (:mod:`rl_system.policy.export`);
    ``pick`` as in :func:`load_policy`; ``agent`` (a multi-agent run): that agent's policy alone,
    its observation in (:mod:`rl_system.algos.mappo.one_agent`)."""
    from rl_system.policy.export import ExportError, check_format, export_policy

    check_format(format)  # before the checkpoint is read: a bad format fails at once
    try:
        policy = load_policy(run_or_checkpoint, pick=pick)
    except ValueError as err:
        raise ExportError(str(err)) from None
    return export_policy(policy, format, out, agent=agent)


def make_env(name: str, num_envs: int = 1, device: str = "cpu", seed: int = 0, **kwargs: Any) -> Any:
    """A batched env by name, as ``env.name`` in a config (``CartPole``, ``gym:<id>``,
    ``package.module:Name`` ...): ``num_envs`` envs stepped at once as torch tensors."""
    from rl_system.envs import make_env as _make_env

    return _make_env(name, num_envs, device, seed=seed, **kwargs)

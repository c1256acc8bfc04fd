"""The whole run config, :class:`RunConfig`: every section, and the checks that span sections.

The algorithms' sections come from the registry (:mod:`rl_system.algos.registry`): each registered
algorithm's settings under its name (``ppo:``, ``mappo:``, ``hmasd:``, ...), so an algorithm
joins the config by its registry line. What a run asks of its algorithm (closed-form gradients,
V-trace, a learner group, ...) is checked against the algorithm's capabilities, never its name.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, create_model, model_validator

from rl_system.algos import registry
from rl_system.algos import spec as cap
from rl_system.algos.ppo.config import ModelConfig
from rl_system.config.base import Strict
from rl_system.config.sections import (
    CheckpointConfig,
    EnvConfig,
    LearnerConfig,
    ReseedConfig,
    RollbackConfig,
    SelfPlayConfig,
    TrackersConfig,
    WorkersConfig,
)


class RunConfigBase(Strict):
    """The run config's sections that belong to no one algorithm, and the checks across sections;
    :data:`RunConfig` adds each registered algorithm's section."""

    algo: str = "ppo"
    """The algorithm, by its name in the registry (:mod:`rl_system.algos.registry`); [Algorithms](#algorithms) lists
    each with its settings section and what it can do."""
    seed: int = 0
    """Seeds the learner, and every worker's envs and sampling (worker ``i`` uses ``seed·10007 + i``)."""
    env: EnvConfig = Field(default_factory=EnvConfig)
    workers: WorkersConfig = Field(default_factory=WorkersConfig)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The network of the algorithms that build theirs from it (PPO's actor-critic, or ``model.network``)."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    selfplay: SelfPlayConfig = Field(default_factory=SelfPlayConfig)
    reseed: ReseedConfig = Field(default_factory=ReseedConfig)
    """Reseed on stall (off unless ``reseed.at_env_steps`` is set)."""
    rollback: RollbackConfig = Field(default_factory=RollbackConfig)
    """Roll back to the best checkpoint on collapse (off unless ``rollback.drop`` is set)."""
    max_policy_lag: int = Field(0, ge=0)
    """Rollouts from policy versions older than ``version − max_policy_lag`` are never trained on (counted as dropped
    and re-requested). 0 is strictly on-policy (synchronous rounds); > 0 lets workers sample the next round while the
    learner updates: each worker samples its next rollout with the weights it was just given, so with 1 every rollout
    after the first round is exactly one version behind, whichever worker finishes first, and a seed repeats bit for
    bit (``tests/run/test_training.py``, ``tests/run/test_overlap.py``)."""
    max_env_steps: int = Field(1_000_000, gt=0)
    """Stop after this many env steps; also the horizon of learning-rate annealing."""
    max_wall_s: float | None = Field(None, gt=0)
    """Stop after this many seconds of training (none: no limit)."""
    target_return: float | None = None
    """Record the wall time and env steps at which the 100-episode mean return first reaches this (``summary.json``:
    ``time_to_target_s``, ``steps_to_target``) and stop there, unless ``stop_at_target`` is false."""
    stop_at_target: bool = True
    """Stop when ``target_return`` is reached."""
    return_window: int = Field(100, gt=0)
    """Episodes in the mean return and outcome rates ("100-episode mean"); the return must fill a whole window to count
    for ``target_return`` and reseeding."""
    compression: Literal["auto", "lz4", "none"] = "auto"
    """Rollout payloads: ``auto`` LZ4-compresses only for a worker on another node than the learner; ``lz4`` always;
    ``none`` never ([wire_cost.md](wire_cost.md))."""
    compression_level: int = Field(0, ge=0, le=16)
    """0 = LZ4 default; 1–12 = LZ4 HC at that level (up to 16 accepted, clamped to 12)."""
    codec_filters: Literal["auto", "none"] = "auto"
    """Bit-exact preconditioning of compressed columns (integer narrowing, XOR along time, byte
    shuffle), chosen per column; ``none`` is slightly cheaper on links faster than ~4 Gbit/s
    (``docs/wire_cost.md``)."""
    run_dir: str = "runs"
    """Parent directory; each run writes to ``run_dir/<name>``."""
    run_name: str | None = None
    """The run directory's name under ``run_dir`` (default ``<env>-<algo>-<YYYYmmdd-HHMMSS>``, ``:`` in the env name
    replaced by ``-``); ``rl-system train --run-dir`` overrides both."""
    archive_every: int = Field(0, ge=0)
    """Also write every K-th round's rollouts as an Arrow IPC file (0: off); inspect with ``rl-system rollouts
    inspect``."""
    archive_dir: str | None = None
    """Where archives go: a local path or a filesystem URI (``s3://…``, ``gs://…``); default ``<run dir>/rollouts``."""
    log_every_s: float = Field(1.0, ge=0)
    """Seconds between console progress lines."""
    tensorboard: bool = True
    """Write TensorBoard event files to ``<run dir>/tb``."""
    trackers: TrackersConfig = Field(default_factory=TrackersConfig)
    """Weights & Biases and MLflow beside TensorBoard (:mod:`rl_system.observe.trackers`)."""
    ray_dashboard: bool = False
    """Start the Ray dashboard (``http://127.0.0.1:8265``) with the embedded Ray of a run or sweep (``rl-system tune``)
    without ``--address``; off by default because on a laptop its processes cost about a second of start-up and
    compete with the actors for the cores. A cluster has its own dashboard either way."""
    malloc: Literal["retain", "system"] = "retain"
    """The C heap of the learner and worker processes (glibc only; ``rl_system/heap.py``): ``retain`` keeps freed blocks
    up to 32 MiB in the heap and up to 256 MiB of free heap, so an update's activations are not unmapped and faulted
    in again every minibatch (MinAtar's CNN update: 49k–131k page faults to 0, 1.3× faster end to end); ``system``:
    glibc's defaults. The arithmetic is the same either way."""
    startup_timeout_s: float = Field(300.0, gt=0)
    """How long the run waits for its actors to be placed and started (e.g. while an autoscaling cluster adds nodes),
    saying every 5 s which are pending, before it gives up with one line (exit 1)."""

    @model_validator(mode="before")
    @classmethod
    def _registered(cls, data: Any) -> Any:
        """An ``algo`` the registry does not know: one line naming the registered algorithms (before
        its section, which only a registered algorithm has, is called an unknown key)."""
        if isinstance(data, dict) and "algo" in data:
            try:
                registry.get_spec(data["algo"])
            except (registry.UnknownAlgorithm, TypeError):
                raise ValueError(f"algo: unknown algorithm {data['algo']!r}; registered: "
                                 f"{', '.join(registry.names())}") from None
        return data

    @model_validator(mode="after")
    def _capabilities(self) -> "RunConfigBase":
        """What the run asks of its algorithm, each against the algorithm's capabilities."""
        spec = registry.get_spec(self.algo)
        asked = ((self.model.network is not None, cap.MODEL_SECTION, "model.network"),
                 (self.model.recurrent != "none", cap.MODEL_SECTION, "model.recurrent"),
                 (self.model.recurrent != "none", cap.RECURRENT, "model.recurrent"),
                 (self.ppo.value_target == "vtrace", cap.VTRACE, "ppo.value_target: vtrace"),
                 (self.ppo.ratio_anchor == "proximal", cap.PROXIMAL, "ppo.ratio_anchor: proximal"),
                 (self.learner.compile, cap.COMPILE, "learner.compile"),
                 (self.learner.gradients == "closed_form", cap.CLOSED_FORM, "learner.gradients: closed_form"),
                 (self.learner.num_learners > 1, cap.LEARNER_GROUP, "learner.num_learners"),
                 (self.selfplay.enabled, cap.SELFPLAY, "selfplay.enabled"))
        for wanted, capability, key in asked:
            if not wanted:
                continue
            try:
                registry.require(self.algo, capability, key)
            except registry.MissingCapability as err:
                own = f" (its own: {spec.recurrent_key})" if key == "model.recurrent" and spec.recurrent_key else ""
                raise ValueError(f"{err}{own}") from None
        return self

    @model_validator(mode="after")
    def _across_sections(self) -> "RunConfigBase":
        if self.ppo.burn_in >= self.workers.rollout_len:
            raise ValueError(f"ppo.burn_in ({self.ppo.burn_in}) must be below workers.rollout_len "
                             f"({self.workers.rollout_len}): burn-in steps carry no loss")
        if self.model.recurrent != "none" and self.selfplay.enabled:
            raise ValueError("model.recurrent with selfplay: a recurrent opponent snapshot is not supported")
        if self.workers.wait_for == "any" and self.max_policy_lag == 0:
            raise ValueError("workers.wait_for: any takes rollouts as they arrive, some from a policy version "
                             "behind, and max_policy_lag is 0 (the gate would drop them); set max_policy_lag >= 1 "
                             "or wait_for: all")
        if self.ppo.value_target == "vtrace" and self.max_policy_lag == 0:
            raise ValueError("ppo.value_target: vtrace corrects for policy lag, and max_policy_lag is 0 (every "
                             "rollout is on-policy: its targets are gae's); set max_policy_lag >= 1 or use gae")
        if self.ppo.ratio_anchor == "proximal" and self.max_policy_lag == 0:
            raise ValueError("ppo.ratio_anchor: proximal corrects for policy lag, and max_policy_lag is 0 (every "
                             "rollout is on-policy: the proximal policy is the behaviour one); set max_policy_lag "
                             ">= 1 or use behaviour")
        if self.learner.gradients == "closed_form" and self.learner.compile:
            raise ValueError("learner.gradients: closed_form replaces the autograd loss that learner.compile "
                             "compiles; set one of them")
        registry.get_spec(self.algo).checks(self)  # the algorithm's own, across its section and the others
        return self

    @model_validator(mode="after")
    def _learner_group(self) -> "RunConfigBase":
        lc = self.learner
        if lc.num_learners > self.workers.num_workers:
            raise ValueError(f"learner.num_learners ({lc.num_learners}) exceeds workers.num_workers "
                             f"({self.workers.num_workers}): each learner trains on whole rollouts")
        if lc.backend == "nccl" and (lc.num_gpus < 1 or lc.device == "cpu"):
            raise ValueError("learner.backend=nccl needs a whole GPU per learner (learner.num_gpus >= 1, "
                             "learner.device auto or cuda); CPU learners and GPU shares use gloo")
        return self

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        """Configs saved in checkpoints before the ``reseed`` section was named so called it
        ``restart``; read them as they were meant."""
        if isinstance(data, dict) and "restart" in data and "reseed" not in data:
            data = {("reseed" if k == "restart" else k): v for k, v in data.items()}
        return data


def _with_algorithm_sections() -> type[RunConfigBase]:
    """:class:`RunConfigBase` with a section per registered algorithm, named like it."""
    sections: dict[str, Any] = {
        name: (spec.config, Field(default_factory=spec.config, description=f"{spec.title} (algo: {name}): {spec.summary}"))
        for name, spec in registry.specs().items()}
    return create_model("RunConfig", __base__=RunConfigBase, __module__=__name__,
                        __doc__="Top-level config of a training run.", **sections)


RunConfig = _with_algorithm_sections()
"""Top-level config of a training run: :class:`RunConfigBase` and each registered algorithm's section."""

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
    """A registered algorithm (:mod:`rl_system.algos.registry`): ``ppo``, ``mappo``, ``hmasd``, ..."""
    seed: int = 0
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
    """Rollouts from policy versions older than ``version - max_policy_lag`` are dropped."""
    max_env_steps: int = Field(1_000_000, gt=0)
    max_wall_s: float | None = Field(None, gt=0)
    target_return: float | None = None
    """Record the time and env steps at which the 100-episode mean return first reaches this, and
    stop there unless ``stop_at_target`` is false."""
    stop_at_target: bool = True
    return_window: int = Field(100, gt=0)
    compression: Literal["auto", "lz4", "none"] = "auto"
    """``auto``: LZ4 only for workers on another node than the learner (on one node the object
    store is shared memory and compression costs more than it saves)."""
    compression_level: int = Field(0, ge=0, le=16)
    codec_filters: Literal["auto", "none"] = "auto"
    """Bit-exact preconditioning of compressed columns (integer narrowing, XOR along time, byte
    shuffle), chosen per column; ``none`` is slightly cheaper on links faster than ~4 Gbit/s
    (``docs/wire_cost.md``)."""
    run_dir: str = "runs"
    """Parent directory; each run writes to ``run_dir/<name>``."""
    run_name: str | None = None
    archive_every: int = Field(0, ge=0)
    """Also write every K-th round's rollouts as an Arrow IPC file (0: off)."""
    archive_dir: str | None = None
    """Where archives go (local path or filesystem URI); default ``<run dir>/rollouts``."""
    log_every_s: float = Field(1.0, ge=0)
    tensorboard: bool = True
    trackers: TrackersConfig = Field(default_factory=TrackersConfig)
    """Weights & Biases and MLflow beside TensorBoard (:mod:`rl_system.observe.trackers`)."""
    ray_dashboard: bool = False
    """Start the Ray dashboard with the embedded Ray (a run without ``--address``). Off by default:
    on a laptop its seven processes cost about a second of start-up and compete with the actors
    for the cores. A cluster (``--address``) has its own dashboard either way."""
    malloc: Literal["retain", "system"] = "retain"
    """The C heap of the learner and worker processes (glibc only, :mod:`rl_system.heap`).
    ``retain``: keep freed blocks for the next minibatch instead of unmapping them and faulting
    them in again (MinAtar's conv update 1.4-1.5x faster); ``system``: glibc's defaults."""
    startup_timeout_s: float = Field(300.0, gt=0)
    """How long the run waits for its actors to be placed and started (e.g. while an autoscaling
    cluster adds nodes) before it gives up with one line."""

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

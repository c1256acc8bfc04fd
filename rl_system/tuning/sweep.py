"""``rl-system tune``: a sweep of whole runs on Ray Tune.

* Each trial is a full run (:mod:`rl_system.tuning.trial`) in a placement group sized from its
  own config (:func:`rl_system.actors.placement.run_bundles`): the run loop, one bundle per worker, one
  per learner. A searched ``workers.num_workers`` sizes each trial by its own value.
* Schedulers: ``fifo`` (every trial runs its whole budget), ``asha`` (ASHA; rungs in env steps,
  from ``--grace-steps`` up to ``max_env_steps``), ``pbt`` (population-based training: every
  ``--perturbation-steps`` env steps the bottom quarter clones a top-quarter trial's checkpoint
  and perturbs the searched keys but ``grid()`` ones, which set the members' starting points;
  ``--pbt-start config`` starts every member at the config's values; with ``--pbt-synch`` every trial waits at each perturbation
  point until all have reached it, which costs a restart of each trial per point but compares
  trials at equal env steps, even when they do not all run at once). Every scheduler maximises
  ``--metric``.
* The experiment directory holds Tune's state (``rl-system tune --resume DIR`` continues a sweep
  stopped by Ctrl-C or a driver crash; unfinished trials restart from their last checkpoint),
  ``sweep.yaml`` (what was asked), ``results.parquet`` (one row per trial), and
  ``best_config.yaml``, the best trial's whole config, which ``rl-system train`` takes as it is.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from rl_system.actors.placement import run_bundles
from rl_system.config import ConfigError, RunConfig, build_config
from rl_system.tuning.space import Spec, parse_search, trial_config
from rl_system.tuning.trial import CHECKPOINT_CLOCK, TRAINABLE, run_trial

SWEEP_FILE, RESULTS_FILE, BEST_FILE = "sweep.yaml", "results.parquet", "best_config.yaml"


@dataclass
class Sweep:
    """What a sweep was asked to do; kept in ``sweep.yaml`` so ``--resume`` needs nothing else."""

    config: dict[str, Any]  # the config tree every trial starts from (file + --set)
    search: list[str]  # the --search assignments
    scheduler: str = "asha"
    metric: str = "return"
    num_samples: int = 8
    max_concurrent: int = 0  # 0: as many as the cluster fits
    grace_steps: int | None = None  # ASHA: the first rung (default max_env_steps / 16)
    perturbation_steps: int | None = None  # PBT: env steps between exploits (default max_env_steps / 10)
    pbt_synch: bool = False  # PBT: every trial waits at each perturbation point for the others
    pbt_start: str = "sampled"  # PBT: "config": the perturbed keys start at the config's values
    head_cpus: float = 0.25  # each trial's run loop (it mostly waits on its actors)
    seed: int | None = None  # the search's own random state (the trials' seeds are config.seed)

    # Parsed once: the specs are asked for by every trial's resources and by the scheduler, and
    # parsing checks each value against the config.
    @cached_property
    def base(self) -> RunConfig:
        return build_config(self.config)

    @cached_property
    def specs(self) -> list[Spec]:
        return parse_search(self.search, self.config)

    def check(self) -> None:
        """Every choice made before a trial starts: one :class:`ConfigError` line if any is bad."""
        base, specs = self.base, self.specs
        if not specs:
            raise ConfigError("tune: nothing to search; give at least one --search KEY=SPEC")
        if self.pbt_start not in ("sampled", "config"):
            raise ConfigError(f"--pbt-start {self.pbt_start!r}: use sampled or config")
        if self.scheduler not in ("fifo", "asha", "pbt"):
            raise ConfigError(f"--scheduler {self.scheduler!r}: use fifo, asha or pbt")
        if self.metric != "return" and not self.metric.endswith(("_rate", "_mean")):
            raise ConfigError(f"--metric {self.metric!r}: use return, <outcome>_rate (e.g. success_rate) or "
                              "<episode stat>_mean (e.g. soups_served_mean)")
        if self.num_samples < 1 or self.max_concurrent < 0:
            raise ConfigError("--num-samples must be >= 1 and --max-concurrent >= 0")
        if self.scheduler == "pbt":
            if not any(spec.perturbed for spec in specs):
                raise ConfigError("--scheduler pbt: nothing to perturb; grid() keys only set the starting points, "
                                  "give a choice/uniform/loguniform/randint --search too")
            if self.perturbation_interval >= base.max_env_steps:
                raise ConfigError(f"--perturbation-steps ({self.perturbation_interval}) must be below max_env_steps "
                                  f"({base.max_env_steps}): PBT would never exploit")
        if self.scheduler == "asha" and self.grace_period >= base.max_env_steps:
            raise ConfigError(f"--grace-steps ({self.grace_period}) must be below max_env_steps ({base.max_env_steps})")

    @property
    def grace_period(self) -> int:
        return self.grace_steps or max(self.base.max_env_steps // 16, 1)

    @property
    def perturbation_interval(self) -> int:
        return self.perturbation_steps or max(self.base.max_env_steps // 10, 1)

    def save(self, exp_dir: Path) -> None:
        exp_dir.mkdir(parents=True, exist_ok=True)
        (exp_dir / SWEEP_FILE).write_text(yaml.safe_dump(asdict(self), sort_keys=False))

    @classmethod
    def load(cls, exp_dir: Path) -> Sweep:
        path = exp_dir / SWEEP_FILE
        if not path.is_file():
            raise ConfigError(f"--resume {exp_dir}: no {SWEEP_FILE} there (not an rl-system tune experiment)")
        return cls(**yaml.safe_load(path.read_text()))


def _scheduler(sweep: Sweep) -> Any:
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    from rl_system.tuning.pbt import PopulationBasedTraining

    if sweep.scheduler == "asha":
        # max_t past the budget: a trial ends itself at max_env_steps (its last round may pass
        # it), with its summary and final checkpoint, rather than being stopped by ASHA there.
        return ASHAScheduler(time_attr="env_steps", max_t=2 * sweep.base.max_env_steps,
                             grace_period=sweep.grace_period, reduction_factor=3)
    if sweep.scheduler == "pbt":
        return PopulationBasedTraining(time_attr=CHECKPOINT_CLOCK, perturbation_interval=sweep.perturbation_interval,
                                       hyperparam_mutations={s.key: s.mutation() for s in sweep.specs if s.perturbed},
                                       quantile_fraction=0.25, resample_probability=0.25, synch=sweep.pbt_synch)
    return FIFOScheduler()


def _trial_dirname(trial: Any) -> str:
    return trial.trial_id  # Tune's default names every searched value: too long for a path


def trial_resources(sweep: Sweep) -> Any:
    """Each trial's placement group, from its own config (a searched worker count counts)."""
    from ray import tune

    def resources(params: dict[str, Any]) -> Any:
        cfg = trial_config(sweep.config, {s.key: params[s.key] for s in sweep.specs if s.key in params})
        return tune.PlacementGroupFactory(run_bundles(cfg, sweep.head_cpus))

    return resources


def trainable(sweep: Sweep) -> Any:
    from ray import tune

    every = sweep.perturbation_interval if sweep.scheduler == "pbt" else None
    fn = tune.with_parameters(run_trial, base=sweep.config, metric=sweep.metric, checkpoint_every_steps=every)
    tune.register_trainable(TRAINABLE, tune.with_resources(fn, trial_resources(sweep)))
    return TRAINABLE


def tuner(sweep: Sweep, exp_dir: Path) -> Any:
    from ray import tune
    from ray.tune.search.basic_variant import BasicVariantGenerator

    sweep.save(exp_dir)
    if sweep.seed is not None:
        random.seed(sweep.seed)  # PBT's choices of whom to clone and how to perturb
    return tune.Tuner(
        trainable(sweep),
        param_space=param_space(sweep),
        tune_config=tune.TuneConfig(metric=sweep.metric, mode="max", scheduler=_scheduler(sweep),
                                    search_alg=BasicVariantGenerator(random_state=sweep.seed),
                                    num_samples=sweep.num_samples, max_concurrent_trials=sweep.max_concurrent or None,
                                    trial_dirname_creator=_trial_dirname, reuse_actors=False),
        run_config=tune.RunConfig(name=exp_dir.name, storage_path=str(exp_dir.parent.resolve()),
                                  # PBT keeps every checkpoint: Tune 2.60's pruning, after an
                                  # exploit, deletes a clone's checkpoint twice and fails the trial.
                                  checkpoint_config=tune.CheckpointConfig(
                                      num_to_keep=None if sweep.scheduler == "pbt" else 4),
                                  failure_config=tune.FailureConfig(max_failures=1), verbose=1),
    )


def param_space(sweep: Sweep) -> dict[str, Any]:
    """Each searched key's initial draw; with ``pbt_start: config`` the perturbed keys start at
    the config's own value (a tuned preset), and PBT explores from there."""
    space = {}
    for spec in sweep.specs:
        if sweep.scheduler == "pbt" and sweep.pbt_start == "config" and spec.perturbed:
            space[spec.key] = _value_at(sweep.config, spec.key)
        else:
            space[spec.key] = spec.domain()
    return space


def _value_at(tree: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        tree = tree[part]
    return tree


def restore(exp_dir: Path) -> tuple[Sweep, Any]:
    from ray import tune

    sweep = Sweep.load(exp_dir)
    if not tune.Tuner.can_restore(str(exp_dir.resolve())):
        raise ConfigError(f"--resume {exp_dir}: no Tune experiment state there yet")
    return sweep, tune.Tuner.restore(str(exp_dir.resolve()), trainable(sweep), resume_unfinished=True,
                                     resume_errored=True)


def local_cpus(sweep: Sweep) -> int:
    """CPUs to advertise for an embedded Ray: at least what ``max_concurrent`` trials (or two)
    request. Rounds are synchronous, so a trial's actors seldom all compute at once."""
    per_trial = sum(b.get("CPU", 0.0) for b in run_bundles(sweep.base, sweep.head_cpus))
    return max(os.cpu_count() or 1, math.ceil(per_trial * max(sweep.max_concurrent or 2, 1)))

"""What happens before a run's first round: Ray (joined or embedded), the run directory's name,
and a probe of the env and the algorithm that turns a config they reject into one
:class:`~rl_system.config.ConfigError` line before any actor starts."""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium
import ray

from rl_system import openmp, ray_env
from rl_system.actors.placement import check_placement
from rl_system.algos import get_algorithm, registry
from rl_system.algos import spec as cap
from rl_system.config import ConfigError, RunConfig
from rl_system.envs import EntryPointError, make_env
from rl_system.envs.base import AgentMixed, is_multi_agent
from rl_system.errors import one_line
from rl_system.run.address import check_reachable  # noqa: F401 - re-exported for the CLIs


def default_run_dir(cfg: RunConfig) -> Path:
    name = cfg.run_name or f"{cfg.env.name.replace(':', '-')}-{cfg.algo}-{datetime.now():%Y%m%d-%H%M%S}"
    return Path(cfg.run_dir) / name


def embedded_cpus(cfg: RunConfig) -> int:
    """Logical CPUs the embedded Ray advertises: at least this machine's cores, and enough for
    every actor the run asks for (its workers and all ``learner.num_learners`` learners).

    Rounds are synchronous: workers sample while the learner waits and vice versa, so advertising
    as many CPUs as the actors request is safe and avoids a deadlock on small machines."""
    wanted = cfg.workers.num_workers * cfg.workers.num_cpus + cfg.learner.num_learners * cfg.learner.num_cpus
    return max(os.cpu_count() or 1, math.ceil(wanted - 1e-9))


def embedded_gpus() -> int:
    """GPUs the embedded Ray advertises: the CUDA devices this process's torch can use."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_embedded_placement(cfg: RunConfig) -> None:
    """Before an embedded Ray starts: :class:`~rl_system.actors.placement.PlacementError` (one config
    line) if the run asks for what this machine does not have (a GPU, a custom resource), instead
    of starting Ray to find out."""
    check_placement(cfg, nodes=[{"CPU": float(embedded_cpus(cfg)), "GPU": float(embedded_gpus())}])


def init_ray(cfg: RunConfig, address: str | None) -> None:
    """Join ``address`` or start an embedded single-node Ray sized for this run.

    Actor output is not forwarded to the console (``log_to_driver=False``): a failing actor is
    reported in one line by the run loop, with the full text in the run's log file, instead of a
    wall of forwarded tracebacks; Ray keeps every actor's output in its session logs."""
    if ray.is_initialized():
        return
    if address:
        join_ray(address)
    else:
        start_embedded_ray(embedded_cpus(cfg), cfg.ray_dashboard, num_gpus=embedded_gpus())


def join_ray(address: str) -> None:
    """Join the cluster at ``address`` (one line within seconds if it is not there), handing the
    job OpenMP's wait policy (:func:`rl_system.openmp.joined_ray_init`)."""
    check_reachable(address)
    ray.init(address=address, log_to_driver=False, **openmp.joined_ray_init())


def start_embedded_ray(num_cpus: int, dashboard: bool, num_gpus: int | None = None) -> None:
    """A new single-node Ray in this process, its processes started from the embedded defaults
    (:func:`rl_system.ray_env.set_embedded_defaults`); ``num_gpus`` None: Ray counts them."""
    ray_env.set_embedded_defaults()
    # address="local": always a new embedded Ray, never an attempt to join a cluster that another
    # process on this machine happens to run.
    with ray_env.embedded_ray_params(dashboard):
        ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=dashboard,
                 log_to_driver=False, configure_logging=False)


def shutdown_ray() -> None:
    """``ray.shutdown()``, without the second it spends on the autoscaler monitor of an embedded
    Ray: Ray stops the GCS first, and the monitor's SIGTERM handler then waits for that GCS until
    Ray gives up on it and kills it. Stopping the monitor first (it holds no state a local run
    needs) saves that wait. Joined clusters are left running, as ``ray.shutdown`` does."""
    if not ray.is_initialized():
        return
    try:
        node = ray._private.worker._global_node  # noqa: SLF001 - the embedded node's processes
        if node is not None and node.is_head():
            node.kill_monitor(check_alive=False)
    except Exception:  # noqa: BLE001 - an optimisation only; plain ray.shutdown() below still stops it
        pass
    ray.shutdown()


def probe_specs(cfg: RunConfig) -> tuple[Any, Any]:
    """The env's observation and action specs, from a one-env copy built here (so the learner can
    start in parallel with the workers), after building one policy from them: a config the env or
    the algorithm rejects (an unknown env kwarg, a feature range past the observation) is one
    :class:`ConfigError` line before any actor starts, not a traceback from every actor."""
    from rl_system.observe.trackers import check_installed

    check_installed(cfg)  # a tracker that cannot start is found before the env is built
    name = cfg.env.name
    try:
        if cfg.env.eval_kwargs:  # the test env too: a typo there is found now, not after training
            make_env(name, 1, "cpu", seed=0, **cfg.env.test_kwargs()).close()
        probe = make_env(name, 1, "cpu", seed=0, **cfg.env.kwargs)
    except EntryPointError as err:
        raise ConfigError(f"env.name: {err}") from None
    except (TypeError, ValueError, ImportError, AttributeError, gymnasium.error.Error) as err:
        raise ConfigError(f"env {name!r}: {one_line(err)}") from None
    obs_spec, action_spec = probe.observation_spec, probe.action_spec
    probe.close()
    if cfg.selfplay.enabled and not callable(getattr(probe, "set_opponent", None)):
        raise ConfigError(f"selfplay.enabled: env {cfg.env.name!r} has no pluggable opponent (set_opponent)")
    kind = cap.MULTI_AGENT if is_multi_agent(action_spec) else cap.SINGLE_AGENT
    try:
        registry.require(cfg.algo, kind, f"env {name!r}")
        if isinstance(action_spec, AgentMixed):
            registry.require(cfg.algo, cap.AGENT_GROUPS, f"env {name!r} (its agents' actions differ in kind or shape)")
    except registry.MissingCapability as err:
        raise ConfigError(str(err)) from None
    try:
        get_algorithm(cfg.algo).make_policy(obs_spec, action_spec, cfg)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{cfg.algo} on env {cfg.env.name!r}: {err}") from None
    return obs_spec, action_spec

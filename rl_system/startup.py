"""What happens before a run's first round: Ray (joined or embedded), the run directory's name,
and a probe of the env and the algorithm that turns a config they reject into one
:class:`~rl_system.config.ConfigError` line before any actor starts."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium
import ray

from envs import EntryPointError, make_env
from rl_system.algos import get_algorithm
from rl_system.config import ConfigError, RunConfig
from rl_system.errors import one_line


def default_run_dir(cfg: RunConfig) -> Path:
    name = cfg.run_name or f"{cfg.env.name.replace(':', '-')}-{cfg.algo}-{datetime.now():%Y%m%d-%H%M%S}"
    return Path(cfg.run_dir) / name


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast (:class:`ConnectionError`, one line) when ``HOST:PORT`` does not accept a TCP
    connection: ``ray.init`` itself retries an unreachable address for minutes. ``auto`` (a
    cluster on this machine) and ``ray://`` client addresses are left to Ray."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConnectionError(f"expected 'auto' or HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise ConnectionError(f"no Ray cluster reachable at {address} ({why} after at most {timeout_s:.0f}s)") from None


def init_ray(cfg: RunConfig, address: str | None) -> None:
    """Join ``address`` or start an embedded single-node Ray sized for this run.

    Actor output is not forwarded to the console (``log_to_driver=False``): a failing actor is
    reported in one line by the run loop, with the full text in the run's log file, instead of a
    wall of forwarded tracebacks; Ray keeps every actor's output in its session logs."""
    if ray.is_initialized():
        return
    if address:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False)
        return
    # Locally, rounds are synchronous: workers sample while the learner waits and vice versa,
    # so advertising at least as many CPUs as the actors request is safe and avoids a deadlock
    # on small machines.
    wanted = cfg.workers.num_workers * cfg.workers.num_cpus + cfg.learner.num_cpus
    # Ray records every actor call in the GCS's task-event table, up to 100,000 of them by default:
    # a long run of small rounds grew the GCS by ~11 MB per 1,000 rounds (bench/soak.py). The last
    # 10,000 are plenty for the dashboard; a value the user set wins.
    os.environ.setdefault("RAY_task_events_max_num_task_in_gcs", "10000")
    # address="local": always a new embedded Ray, never an attempt to join a cluster that another
    # process on this machine happens to run.
    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, int(wanted + 0.999)), include_dashboard=None,
             log_to_driver=False, configure_logging=False)


def probe_specs(cfg: RunConfig) -> tuple[Any, Any]:
    """The env's observation and action specs, from a one-env copy built here (so the learner can
    start in parallel with the workers), after building one policy from them: a config the env or
    the algorithm rejects (an unknown env kwarg, a feature range past the observation) is one
    :class:`ConfigError` line before any actor starts, not a traceback from every actor."""
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
    try:
        get_algorithm(cfg.algo).make_policy(obs_spec, action_spec, cfg)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{cfg.algo} on env {cfg.env.name!r}: {err}") from None
    return obs_spec, action_spec

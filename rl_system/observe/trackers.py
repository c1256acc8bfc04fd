"""Experiment trackers beside TensorBoard: Weights & Biases and MLflow get the same scalars (tag,
env step, value) as the run's ``tb/`` folder, and the run's config as hyperparameters.

Configured under ``trackers`` (``trackers.wandb.enabled``, ``trackers.mlflow.enabled``). Both work
without a server: W&B with ``mode: offline`` writes ``<run dir>/wandb/offline-run-*`` (upload it
later with ``wandb sync``); MLflow without a ``tracking_uri`` (and no ``MLFLOW_TRACKING_URI``)
writes a file store under ``<run dir>/mlruns`` (``mlflow ui --backend-store-uri <run dir>/mlruns``).
A tracker that is not installed is one config-error line before anything starts
(:func:`check_installed`).
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from typing import Any, Protocol

from rl_system.config import ConfigError, RunConfig
from rl_system.errors import one_line

SUCCEEDED = ("completed", "stopped")
"""Run statuses (``summary.json``) a tracker marks as a successful run; any other is a failure."""

PACKAGES = {"wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow-skinny")}
"""tracker -> (import name, what pip installs)"""


class Tracker(Protocol):
    def log(self, step: int, scalars: dict[str, float]) -> None: ...

    def close(self, status: str) -> None: ...


def check_installed(cfg: RunConfig) -> None:
    """:class:`ConfigError` (one line naming the key) for an enabled tracker whose package is missing."""
    for name in enabled(cfg):
        module, dist = PACKAGES[name]
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"trackers.{name}.enabled: the {module} package is not installed (pip install {dist}, "
                              f"or pip install -e '.[{name}]' in a checkout)")


def enabled(cfg: RunConfig) -> list[str]:
    return [name for name in PACKAGES if getattr(cfg.trackers, name).enabled]


def open_trackers(cfg: RunConfig, run_dir: Path) -> list[Tracker]:
    """The enabled trackers, each started with the run's name and config."""
    opened: list[Tracker] = []
    for name in enabled(cfg):
        try:
            opened.append(_OPENERS[name](cfg, run_dir))
        except Exception as err:  # noqa: BLE001 - no key, no server, a bad URI: one line naming the tracker
            for tracker in opened:
                tracker.close("failed")
            raise ConfigError(f"trackers.{name}: cannot start: {type(err).__name__}: {one_line(err)}") from None
    return opened


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"ppo": {"lr": 3e-4}}`` -> ``{"ppo.lr": 3e-4}``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


class WandbTracker:
    """A W&B run named after the run directory; scalars logged at their env step."""

    def __init__(self, cfg: RunConfig, run_dir: Path):
        import wandb

        c = cfg.trackers.wandb
        os.environ.setdefault("WANDB_SILENT", "true")  # the run's console stays the run's
        self.run = wandb.init(project=c.project, entity=c.entity, name=run_dir.name, tags=list(c.tags),
                              dir=str(run_dir), mode=c.mode, config=cfg.model_dump(mode="json"),
                              settings=wandb.Settings(console="off", quiet=True, silent=True))

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.run.log(scalars, step=step)

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status in SUCCEEDED else 1)


class MlflowTracker:
    """An MLflow run in experiment ``trackers.mlflow.experiment``; scalars as metrics at their env
    step, the flattened config as parameters."""

    def __init__(self, cfg: RunConfig, run_dir: Path):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        c = cfg.trackers.mlflow
        uri = c.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or (run_dir / "mlruns").resolve().as_uri()
        if uri.startswith("file:"):
            # MLflow 3 keeps the file store in maintenance mode behind this switch; it is the one
            # backend that needs no server and no database driver.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(c.experiment)
        experiment = found.experiment_id if found else self.client.create_experiment(c.experiment)
        self.run_id = self.client.create_run(experiment, run_name=run_dir.name).info.run_id
        params = [Param(k, str(v)[:6000]) for k, v in _flat(cfg.model_dump(mode="json")).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 parameters per batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])

    def log(self, step: int, scalars: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in scalars.items()])

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, "FINISHED" if status in SUCCEEDED else "FAILED")


_OPENERS = {"wandb": WandbTracker, "mlflow": MlflowTracker}

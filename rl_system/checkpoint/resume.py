"""Finding the checkpoint a ``--resume`` argument means, and loading it.

``--resume`` accepts ``latest`` (the newest run under ``run_dir`` that has checkpoints, or the
``--run-dir`` given), a run directory, a checkpoint directory, or one checkpoint file. For a
directory, the newest checkpoint that loads is used: corrupt or truncated newer ones are skipped
and named in the log. (What ``eval``, ``export`` and the Python API read is chosen by
:mod:`.pick`, which only reads.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_system.checkpoint.format import CheckpointError, load_checkpoint
from rl_system.checkpoint.store import CheckpointStore
from rl_system.config import RunConfig

CHECKPOINT_DIR = "checkpoints"


@dataclass
class Resume:
    state: dict[str, Any]
    manifest: dict[str, Any]
    path: str
    run_dir: Path | None  # where the resumed run keeps writing (TensorBoard continues there)
    skipped: list[tuple[str, str]]


def _newest_run(parent: Path) -> Path:
    runs = [p for p in parent.glob(f"*/{CHECKPOINT_DIR}") if p.is_dir()]
    if not runs:
        raise CheckpointError(f"--resume latest: no run with checkpoints under {parent}")
    return max(runs, key=lambda p: p.stat().st_mtime).parent


def _from_store(ckpt_dir: Path, run_dir: Path | None) -> Resume:
    if not ckpt_dir.is_dir():
        raise CheckpointError(f"{ckpt_dir}: no checkpoints directory")
    store = CheckpointStore(str(ckpt_dir))
    state, manifest, path = store.load_latest_valid(quarantine=True)
    return Resume(state, manifest, path, run_dir, list(getattr(store, "skipped", [])))


def find_resume(spec: str, cfg: RunConfig, run_dir: Path | None) -> Resume:
    """Resolve ``spec`` to a loaded checkpoint; raises :class:`CheckpointError` with one line."""
    if spec == "latest":
        root = run_dir if run_dir is not None else _newest_run(Path(cfg.run_dir))
        return _from_store(root / CHECKPOINT_DIR, root)
    path = Path(spec)
    if path.is_dir():
        if (path / CHECKPOINT_DIR).is_dir():
            return _from_store(path / CHECKPOINT_DIR, run_dir or path)
        return _from_store(path, run_dir or (path.parent if path.name == CHECKPOINT_DIR else None))
    state, manifest = load_checkpoint(spec)
    owner = path.parent.parent if path.parent.name == CHECKPOINT_DIR else None
    return Resume(state, manifest, spec, run_dir or owner, [])

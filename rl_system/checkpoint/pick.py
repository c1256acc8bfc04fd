"""Which checkpoint of a run a reader means: the one choice that ``rl-system eval``, ``rl-system
export``, :func:`rl_system.load_policy`, :func:`rl_system.evaluate` and :func:`rl_system.export`
share (``--pick`` on the command line, ``pick=`` in Python; the same names and the same default).

The source is a run directory, its checkpoints directory, or one checkpoint file (a source that
holds just that checkpoint); the pick chooses among what it holds:

* ``best`` (the default): the checkpoint with the best training mean return, the one ``best.json``
  names; where no checkpoint has a mean return (none was written after an episode had finished),
  the latest.
* ``latest``: the newest checkpoint that loads. ``final`` is another name for it, the word
  :attr:`rl_system.TrainResult.final_checkpoint` uses (a run's last checkpoint is its newest).
* ``v<N>``: the checkpoint of policy version N (``v12``).

Why ``best`` by default: what a user tests, deploys or exports is the policy that did best, and a
run's training return often peaks before its end (a learning rate that is high for speed, a late
collapse), so its newest checkpoint can be worse than one it already wrote. The fall-back keeps
the default working on a run that has nothing better to offer than its newest checkpoint (a short
run, a policy written before any episode finished). ``--pick latest`` asks where the run stopped.

Only reads: nothing in the directory is cleaned up, renamed or quarantined (a run may be writing
there at the same time); resuming a run (:mod:`.resume`) is the writer's business.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the format loads torch; imported where a checkpoint is read, not for --help
    from rl_system.checkpoint.resume import Resume
    from rl_system.checkpoint.store import CheckpointInfo, CheckpointStore

DEFAULT_PICK = "best"
PICKS = ("best", "latest", "final")  # and v<N>
PICK_HELP = ("which checkpoint of a run: best, the one with the best training mean return (the one best.json "
             "names), else (no checkpoint has one) the latest; latest, the newest that loads (final is the same); "
             "vN, policy version N. The same choice, names and default as the Python API's pick=; one the run "
             "lacks is one line naming the versions it has (default: %(default)s)")
_VERSION_RE = re.compile(r"^v(\d+)$")


def check_pick(pick: str) -> str:
    """``pick`` if it names a choice (:data:`PICKS` or ``v<N>``), else :class:`ValueError` in one line."""
    if pick in PICKS or (isinstance(pick, str) and _VERSION_RE.match(pick)):
        return pick
    raise ValueError(f"pick must be best, latest, final or v<N> (a policy version, e.g. v12), got {pick!r}")


def _version(pick: str) -> int | None:
    m = _VERSION_RE.match(pick)
    return int(m.group(1)) if m else None


def _holdings(store: CheckpointStore, infos: list[CheckpointInfo]) -> str:
    """What a checkpoints directory holds, for an error line: ``v1, v3, v5 (best v3)``."""
    version_at = {info.path: info.policy_version for info in infos}
    best = store.best_path()
    best_v = f"best v{version_at[best]}" if best in version_at else "none has a mean return"
    return f"{', '.join(f'v{info.policy_version}' for info in infos)} ({best_v})"


def _from_dir(ckpt_dir: Path, run_dir: Path | None, pick: str) -> Resume:
    from rl_system.checkpoint.format import CheckpointError, checkpoint_name
    from rl_system.checkpoint.resume import Resume
    from rl_system.checkpoint.store import CheckpointStore

    store = CheckpointStore(str(ckpt_dir), clean=False)
    infos = store.list()
    if not infos:
        raise CheckpointError(f"{ckpt_dir} has no checkpoints")
    wanted = _version(pick)
    if wanted is not None:
        if wanted not in {info.policy_version for info in infos}:
            raise CheckpointError(f"{ckpt_dir} has no checkpoint v{wanted}; it has {_holdings(store, infos)}")
        state, manifest = store.load(checkpoint_name(wanted))
        return Resume(state, manifest, str(ckpt_dir / checkpoint_name(wanted)), run_dir, [])
    if pick == "best" and store.best_path() is not None:
        state, manifest, path = store.load_best()
    else:
        state, manifest, path = store.load_latest_valid()
    return Resume(state, manifest, path, run_dir, list(store.skipped))


def _from_file(path: Path, run_dir: Path | None, pick: str) -> Resume:
    from rl_system.checkpoint.format import CheckpointError, load_checkpoint
    from rl_system.checkpoint.resume import Resume

    state, manifest = load_checkpoint(str(path))
    wanted, held = _version(pick), manifest.get("policy_version")
    if wanted is not None and held != wanted:
        which = f"v{held}" if held is not None else "of no recorded version"
        raise CheckpointError(f"{path} is one checkpoint, {which}, not v{wanted}")
    return Resume(state, manifest, str(path), run_dir, [])


def pick_checkpoint(source: str | Path, pick: str = DEFAULT_PICK) -> Resume:
    """The checkpoint ``pick`` names in ``source`` (a run directory, a checkpoints directory or one
    checkpoint file), loaded, with the run directory it belongs to where known. ``pick``: see the
    module (``best``, ``latest``, ``final``, ``v<N>``); :class:`ValueError` for one that names no
    choice, :class:`CheckpointError` (one line, naming what the run has) for one the source lacks."""
    from rl_system.checkpoint.format import CheckpointError
    from rl_system.checkpoint.resume import CHECKPOINT_DIR

    check_pick(pick)
    path = Path(source)
    if path.is_dir():
        if (path / CHECKPOINT_DIR).is_dir():
            return _from_dir(path / CHECKPOINT_DIR, path, pick)
        return _from_dir(path, path.parent if path.name == CHECKPOINT_DIR else None, pick)
    if not path.exists():
        raise CheckpointError(f"{source}: no such run directory or checkpoint file")
    owner = path.parent.parent if path.parent.name == CHECKPOINT_DIR else None
    return _from_file(path, owner, pick)

"""Errors as the user sees them: one line, the cause first.

Every place that reports an exception to a person (console, ``summary.json``, checkpoint stats,
``CheckpointError`` / ``ArchiveError`` messages) goes through :func:`one_line`, so the same
error reads the same everywhere.
"""

from __future__ import annotations


class TrainingError(RuntimeError):
    """A run cannot go on; the message is meant for the user as is (one line)."""


class ResumeError(TrainingError):
    """``resume`` names nothing loadable (no checkpoint, none valid); one line."""


class EnvBrokeContract(TrainingError):
    """A worker's env broke the env API's contract (``rl_system.envs.base.EnvContractError``): the
    run ends at once (exit 2), one line naming the env and what it did."""


class RayStartError(TrainingError):
    """Ray could not be started or joined; one line naming the address."""


# torch's weights_only refusal is a long message whose reason sits on one of these lines.
_CAUSE_MARKERS = ("Unsupported global", "Unsupported operand", "Trying to")


def _is_ray_error(err: BaseException) -> bool:
    try:
        from ray.exceptions import RayError
    except ImportError:  # pragma: no cover - Ray is a dependency; keep this module import-light
        return False
    return isinstance(err, RayError)


def one_line(err: BaseException, with_type: bool = False, limit: int = 300) -> str:
    """``err`` as one line of at most ``limit`` characters.

    Ray's errors open with a banner and a forwarded traceback, so their cause is the last
    non-empty line; torch's unpickling refusals name the refused global on a marked line; any other
    error's first non-empty line is its message. ``with_type`` prefixes the exception's class name
    (``"OSError: disk full"``). An error with no message is its class name."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    marked = [ln for ln in lines if ln.startswith(_CAUSE_MARKERS)]
    if not lines:
        text = ""
    elif _is_ray_error(err):
        text = lines[-1]
    else:
        text = marked[0] if marked else lines[0]
    if not text:
        return type(err).__name__
    return (f"{type(err).__name__}: {text}" if with_type else text)[:limit]

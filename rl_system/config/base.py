"""What every config section shares: one-line errors (:class:`ConfigError`), strict keys
(:class:`Strict`), and the thread-count type."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict


class ConfigError(ValueError):
    """A config problem, already phrased as one line for the user."""


class Strict(BaseModel):
    # extra="forbid" turns a typo in a key into an error instead of a silently ignored setting. Each
    # field's docstring is its help in docs/reference.md (bench.publish.reference_tables reads it from
    # the source; pydantic's use_attribute_docstrings would parse every model's source at import).
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _threads(value: Any) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError("expected a thread count >= 1 or 'auto'")


Threads = Annotated[Any, AfterValidator(_threads)]
"""Torch intra-op threads of an actor: a count, or ``auto`` (:func:`rl_system.device.resolve_threads`)."""

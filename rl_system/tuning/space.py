"""``--search KEY=SPEC``: the search space of a sweep, over any config key.

SPEC is one of::

    choice(a, b, ...)      one of the values, drawn at random per trial
    grid(a, b, ...)        every value, each in its own trial (times --num-samples)
    uniform(lo, hi)        a float drawn uniformly in [lo, hi)
    loguniform(lo, hi)     a float drawn log-uniformly in [lo, hi), 0 < lo
    randint(lo, hi)        an integer in [lo, hi)

Values are YAML scalars or lists, as in ``--set`` (``choice([64, 64], [256, 256])``,
``choice(tanh, relu)``). Every value and both bounds are checked against the config before a
trial starts, so a bad SPEC is one config-error line, not a sweep of failed trials.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import yaml

from rl_system.config import ConfigError, RunConfig, build_config, set_key

KINDS = {"choice": None, "grid": None, "uniform": 2, "loguniform": 2, "randint": 2}
_SPEC = re.compile(r"^\s*([a-z]+)\s*\((.*)\)\s*$", re.DOTALL)


@dataclass(frozen=True)
class Spec:
    """One searched key: ``kind`` is a key of :data:`KINDS`, ``values`` its arguments."""

    key: str
    kind: str
    values: tuple[Any, ...]

    def domain(self) -> Any:
        """The Tune search domain (``grid`` as Tune's grid search)."""
        from ray import tune

        lo, hi = (self.values + (None, None))[:2]
        return {"choice": lambda: tune.choice(list(self.values)),
                "grid": lambda: tune.grid_search(list(self.values)),
                "uniform": lambda: tune.uniform(lo, hi),
                "loguniform": lambda: tune.loguniform(lo, hi),
                "randint": lambda: tune.randint(lo, hi)}[self.kind]()

    @property
    def perturbed(self) -> bool:
        """Whether population-based training perturbs this key: every kind but ``grid``, whose
        values set the population's starting points (e.g. one member per ``seed``)."""
        return self.kind != "grid"

    def mutation(self) -> Any:
        """What population-based training resamples this key from (a list for ``choice``)."""
        return list(self.values) if self.kind == "choice" else self.domain()


def _number(value: Any) -> Any:
    """YAML 1.1 reads ``1e-4`` as a string; a bound or value that reads as a number is one."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def parse_spec(assignment: str) -> Spec:
    """``KEY=SPEC`` as a :class:`Spec` (its values not yet checked against the config)."""
    key, sep, spec = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--search {assignment!r}: expected KEY=SPEC, e.g. ppo.lr=loguniform(1e-4, 1e-2)")
    m = _SPEC.match(spec)
    if not m or m.group(1) not in KINDS:
        raise ConfigError(f"--search {key}: {spec.strip()!r} is not a SPEC; use one of "
                          + ", ".join(f"{k}(...)" for k in KINDS))
    kind, inner = m.groups()
    try:
        values = yaml.safe_load(f"[{inner}]")
    except yaml.YAMLError:
        raise ConfigError(f"--search {key}: cannot read the values of {spec.strip()!r}") from None
    values = tuple(_number(v) for v in values)
    arity = KINDS[kind]
    if arity is None and not values:
        raise ConfigError(f"--search {key}: {kind}() needs at least one value")
    if arity is not None and len(values) != arity:
        raise ConfigError(f"--search {key}: {kind} takes (lo, hi), got {len(values)} value(s)")
    if arity is not None:
        _check_bounds(key, kind, values)
    return Spec(key, kind, values)


def _check_bounds(key: str, kind: str, values: tuple[Any, ...]) -> None:
    lo, hi = values
    numeric = (int,) if kind == "randint" else (int, float)
    if not all(isinstance(v, numeric) and not isinstance(v, bool) for v in values):
        raise ConfigError(f"--search {key}: {kind} bounds must be {'integers' if kind == 'randint' else 'numbers'}, "
                          f"got {lo!r}, {hi!r}")
    if not lo < hi:
        raise ConfigError(f"--search {key}: {kind} needs lo < hi, got {lo!r}, {hi!r}")
    if kind == "loguniform" and lo <= 0:
        raise ConfigError(f"--search {key}: loguniform needs 0 < lo, got {lo!r}")


def _candidates(spec: Spec) -> tuple[Any, ...]:
    """Values that stand for the whole range when checking it against the config."""
    if spec.kind == "randint":
        return spec.values[0], spec.values[1] - 1
    return spec.values


def parse_search(assignments: list[str], base: dict[str, Any]) -> list[Spec]:
    """Parse every ``--search`` and check each value (or both bounds) against the config
    ``base`` (a config tree), so a key that does not exist or a value it refuses is one line."""
    specs = [parse_spec(a) for a in assignments]
    seen: set[str] = set()
    for spec in specs:
        if spec.key in seen:
            raise ConfigError(f"--search {spec.key}: given twice")
        seen.add(spec.key)
        for value in _candidates(spec):
            try:
                trial_config(base, {spec.key: value})
            except ConfigError as err:
                raise ConfigError(f"--search {spec.key}: value {value!r}: {err}") from None
    return specs


def trial_config(base: dict[str, Any], params: dict[str, Any]) -> RunConfig:
    """The config of a trial: ``base`` (a config tree) with ``params`` (dotted key -> value)."""
    tree = copy.deepcopy(base)
    for key, value in params.items():
        set_key(tree, key, value)
    return build_config(tree)

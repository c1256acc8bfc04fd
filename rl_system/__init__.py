"""rl_system: a distributed actor-learner reinforcement-learning system on Ray.

The Python API (``docs/python_api.md``): :func:`train`, :func:`load_policy`, :func:`evaluate`,
:func:`export`, :func:`make_env`, :func:`as_config`. Imported on first use, so ``import rl_system`` stays light
(no torch or Ray until a function needs them)."""

__version__ = "0.1.0"

_API = ("train", "load_policy", "evaluate", "export", "make_env", "as_config", "TrainResult", "RoundInfo", "Policy")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from rl_system import api

        return getattr(api, name)
    raise AttributeError(f"module 'rl_system' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

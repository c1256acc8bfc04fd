"""Packaging beyond what pyproject.toml can say statically: the repository's top-level ``envs/``
folder installs as ``rl_system.envs``, so the import name is the project's own and never shadows
(or is shadowed by) a user's ``envs`` package."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["rl_system", "rl_system.*"]), "rl_system.envs",
              *(f"rl_system.envs.{name}" for name in find_packages("envs"))],
    package_dir={"rl_system.envs": "envs"},
    package_data={"rl_system.envs.overcooked": ["layouts/*.layout"]},
)

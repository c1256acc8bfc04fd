"""cluster.yaml passes Ray's own cluster-config validation, and launch/train.py builds the right
``rl-system train`` command line. No Ray cluster is started; the whole file runs in about a second."""

from __future__ import annotations

import copy
import importlib.util
import shlex
from pathlib import Path

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")  # Ray's validate_config needs it

from ray.autoscaler._private.util import prepare_config, validate_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_YAML = ROOT / "cluster.yaml"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def _validated(config: dict) -> dict:
    """What `ray up` does before launching anything: fill in the provider's defaults, then
    validate against ray-schema.json plus Ray's extra checks."""
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def _option(commands: list[str], name: str) -> list[str]:
    """Values of ``--name=value`` / ``--name value`` across shell command strings."""
    values = []
    for cmd in commands:
        words = shlex.split(cmd)
        for i, word in enumerate(words):
            if word.startswith(f"{name}="):
                values.append(word.split("=", 1)[1])
            elif word == name and i + 1 < len(words):
                values.append(words[i + 1])
    return values


# -- cluster.yaml ------------------------------------------------------------------------------
def test_cluster_yaml_passes_ray_validation(raw):
    cfg = _validated(raw)
    assert cfg["cluster_name"] == "rl-system"
    assert cfg["provider"]["type"] == "aws"


def test_validation_is_strict(raw):
    """The check above can fail: a misspelt key is rejected by Ray's schema."""
    bad = copy.deepcopy(raw)
    bad["available_node_types"]["gpu_worker"]["min_worker"] = 1
    with pytest.raises(jsonschema.ValidationError):
        _validated(bad)


def test_node_types_referenced_exist(raw):
    types = raw["available_node_types"]
    assert raw["head_node_type"] in types
    workers = {name: t for name, t in types.items() if name != raw["head_node_type"]}
    assert workers, "no worker node type"
    for name, t in workers.items():
        assert 0 <= t.get("min_workers", 0) <= t["max_workers"] <= raw["max_workers"], name
    assert sum(t.get("min_workers", 0) for t in workers.values()) <= raw["max_workers"]
    # Node-level docker settings only apply to workers (the head uses the global block).
    assert "docker" not in types[raw["head_node_type"]]


def test_gpu_worker_type_runs_the_image_with_gpus(raw):
    docker = raw["docker"]
    assert docker["image"].endswith("/rl-system:latest") and docker["container_name"]
    gpu = raw["available_node_types"]["gpu_worker"]
    assert gpu["node_config"]["InstanceType"].startswith(("g", "p"))  # an AWS GPU family
    assert "--gpus all" in gpu["docker"]["worker_run_options"]
    # --gpus all is not global: it would fail on the CPU-only head.
    assert not any("--gpus" in opt for opt in docker.get("run_options", []) + docker.get("head_run_options", []))


def test_dashboard_stays_on_loopback(raw):
    head = raw["head_start_ray_commands"]
    assert any("ray start --head" in " ".join(shlex.split(c)) for c in head)
    hosts = _option(head, "--dashboard-host")
    assert hosts and set(hosts) <= LOOPBACK, hosts
    assert "0.0.0.0" not in " ".join(head)


def test_prometheus_metrics_port_on_every_node(raw):
    head = _option(raw["head_start_ray_commands"], "--metrics-export-port")
    workers = _option(raw["worker_start_ray_commands"], "--metrics-export-port")
    assert head and head == workers
    assert int(head[0]) > 0


def test_setup_is_minimal(raw):
    """The image carries the project: nothing is pip-installed when a node starts."""
    for key in ("setup_commands", "head_setup_commands", "worker_setup_commands"):
        assert not any("pip install" in c for c in raw.get(key, [])), key


def test_local_provider_switch_as_documented(raw):
    """The on-premises steps in cluster.yaml's header give a config Ray accepts."""
    local = copy.deepcopy(raw)
    local["provider"] = {"type": "local", "head_ip": "10.0.0.10", "worker_ips": ["10.0.0.11", "10.0.0.12"]}
    del local["available_node_types"], local["head_node_type"]
    local["auth"] = {"ssh_user": "me", "ssh_private_key": "~/.ssh/id_ed25519"}
    local.pop("max_workers")
    cfg = _validated(local)
    (node_type,) = cfg["available_node_types"].values()
    assert node_type["min_workers"] == node_type["max_workers"] == 2
    assert cfg["head_start_ray_commands"] == raw["head_start_ray_commands"]


# -- launch/train.py ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def train_py():
    spec = importlib.util.spec_from_file_location("launch_train", ROOT / "launch" / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_py_joins_the_cluster_by_default(train_py):
    argv = train_py.build_argv(["cfg.yaml", "--set", "workers.num_envs=8"], roots=[])
    assert argv == ["train", "cfg.yaml", "--set", "workers.num_envs=8", "--address", "auto"]


@pytest.mark.parametrize("given", [["--address", "10.0.0.1:6379"], ["--address=10.0.0.1:6379"]])
def test_train_py_keeps_a_given_address(train_py, given):
    argv = train_py.build_argv(["cfg.yaml", *given], roots=[])
    assert argv == ["train", "cfg.yaml", *given]


def test_train_py_resolves_config_against_the_checkout(train_py, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no launch/ here, as in the head's home directory
    argv = train_py.build_argv(["--set", "seed=1", "launch/configs/cartpole_ppo.yaml"], roots=[ROOT])
    assert argv[3] == str(ROOT / "launch/configs/cartpole_ppo.yaml")
    assert argv[:3] == ["train", "--set", "seed=1"]
    # An unknown path is passed through for the CLI to report.
    assert train_py.build_argv(["nope.yaml"], roots=[ROOT])[1] == "nope.yaml"


def test_train_py_value_options_match_the_cli(train_py):
    from rl_system.cli.main import parser

    sub = next(a for a in parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    train = sub.choices["train"]
    takes_value = {opt for a in train._actions if a.option_strings and a.nargs != 0
                   for opt in a.option_strings}
    assert takes_value == set(train_py.VALUE_OPTIONS)

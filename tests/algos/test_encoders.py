"""Encoders per observation key (:mod:`rl_system.algos.ppo.encoders`): the choice from the spec,
the shapes each CNN takes, uint8/bool images kept narrow end to end, and the bad-input lines."""

from __future__ import annotations

import pytest
import torch

from rl_system.algos import get_algorithm
from rl_system.algos.ppo.encoders import ConvEncoder, _CircularConv1d, chw, layout_of, plan
from rl_system.config import ConfigError, EncoderConfig, load_config
from rl_system.envs import make_env
from rl_system.envs.base import Discrete, TensorSpec
from rl_system.rollout.codec import decode, encode

_PPO = get_algorithm("ppo")  # the factories over a run config
make_policy = _PPO.make_policy

IMAGE = TensorSpec((3, 40, 40), torch.uint8, 0.0, 255.0)
PLANES = TensorSpec((10, 10, 4), torch.bool, 0.0, 1.0)
SCAN = TensorSpec((1, 36, 4), torch.float32, 0.0, 4.0)
VECTOR = TensorSpec((8,))
CARD = TensorSpec((), torch.int64, 0.0, 3.0)


def test_auto_picks_a_cnn_for_images_onehot_for_small_integers_and_flat_for_the_rest():
    chosen = plan({"image": IMAGE, "planes": PLANES, "lidar": SCAN, "state": VECTOR, "card": CARD,
                   "action_mask": TensorSpec((3,), torch.bool)}, {})
    assert {k: e.type for k, e in chosen.items()} == {
        "image": "nature", "planes": "conv", "lidar": "flat", "state": "flat", "card": "onehot"}
    assert plan({"lidar": SCAN}, {"lidar": EncoderConfig(type="scan")})["lidar"].type == "scan"
    assert plan({"lidar": SCAN}, {"lidar": "scan"})["lidar"].type == "scan"  # the shorthand, via the config


@pytest.mark.parametrize("shape,layout,expected", [
    ((10, 10, 4), "hwc", (4, 10, 10)), ((84, 84, 4), "hwc", (4, 84, 84)), ((4, 84, 84), "chw", (4, 84, 84)),
    ((1, 36, 4), "chw", (1, 36, 4)), ((10, 10, 10), "chw", (10, 10, 10)), ((36, 4), "chw", (1, 36, 4)),
])
def test_layout_guess_reads_the_shortest_last_axis_as_channels(shape, layout, expected):
    assert layout_of(shape, "auto") == layout and chw(shape, "auto") == expected
    assert chw((10, 10, 10), "hwc") == (10, 10, 10) and layout_of((4, 84, 84), "hwc") == "hwc"


@pytest.mark.parametrize("kind,spec,features", [
    ("nature", IMAGE, 512), ("impala", IMAGE, 256), ("conv", PLANES, 128), ("scan", SCAN, 128),
    ("conv", TensorSpec((36, 4)), 128),
])
def test_each_cnn_maps_a_batch_of_its_entry_to_its_features(kind, spec, features):
    enc = ConvEncoder(spec, EncoderConfig(type=kind))
    x = torch.zeros(5, *spec.shape, dtype=spec.dtype)
    assert enc(x).shape == (5, features) and enc.out_dim == features


def test_uint8_pixels_are_scaled_on_the_device_not_on_the_wire():
    enc = ConvEncoder(IMAGE, EncoderConfig(type="nature"))
    pixels = torch.randint(0, 256, (4, 3, 40, 40), dtype=torch.uint8)
    float_enc = ConvEncoder(TensorSpec((3, 40, 40)), EncoderConfig(type="nature"))
    float_enc.load_state_dict(enc.state_dict())
    assert torch.allclose(enc(pixels), float_enc(pixels.float() / 255), atol=1e-5)
    # A rollout column of pixels crosses the codec as uint8, bit-exact.
    payload = encode({"obs.image": pixels.unsqueeze(0)}, {"version": 0}, compression="lz4")
    cols, _ = decode(payload)
    assert cols["obs.image"].dtype == torch.uint8 and torch.equal(cols["obs.image"][0], pixels)


def test_the_scan_conv_wraps_around_the_beams():
    conv = _CircularConv1d(4, 8, kernel=5, stride=1)
    x = torch.randn(2, 4, 36)
    # Rotating the scan by 3 beams rotates the features by 3: no seam at beam 0.
    assert torch.allclose(conv(torch.roll(x, 3, dims=2)), torch.roll(conv(x), 3, dims=2), atol=1e-5)


def test_separate_critic_encoders_get_no_actor_gradient():
    cfg = load_config(None, ["model.share_encoder=false", "model.hidden_sizes=[]"])
    policy = make_policy({"image": IMAGE, "state": VECTOR}, Discrete(3), cfg)
    obs = {"image": torch.randint(0, 256, (6, 3, 40, 40), dtype=torch.uint8), "state": torch.randn(6, 8)}
    logp, entropy, value = policy.evaluate(obs, torch.zeros(6, dtype=torch.long))
    logp.sum().backward()
    assert all(p.grad is None or not p.grad.any() for p in policy.critic_encoders.parameters())
    assert any(p.grad is not None and p.grad.any() for p in policy.encoders.parameters())
    assert value.shape == (6,) and len(list(policy.actor)) == 1  # hidden_sizes [] = a linear head


def test_onehot_observations_widen_the_trunk_input():
    policy = make_policy({"card": CARD}, Discrete(4), load_config(None, []))
    assert torch.equal(policy.flatten({"card": torch.tensor([2, 0])}), torch.tensor([[0., 0, 1, 0], [1, 0, 0, 0]]))


def test_gymnasium_bool_planes_stay_bool_from_env_to_policy():
    pytest.importorskip("minatar")
    env = make_env("gym:rl_system.envs.minatar_gym:MinAtar/Breakout-v1", 2, seed=0)
    try:
        assert env.observation_spec["obs"].dtype == torch.bool and env.observation_spec["obs"].shape == (10, 10, 4)
        obs = env.reset(seed=0)
        assert obs["obs"].dtype == torch.bool
        policy = make_policy(env.observation_spec, env.action_spec, load_config(None, []))
        assert policy.encoders.nets["obs"].layout == "hwc"
        assert policy.act(obs)[0].shape == (2,)
    finally:
        env.close()


BAD = [
    (["model.encoders={state: nature}"], "model.encoders.state: a 'nature' encoder needs an image- or scan-shaped entry"),
    (["model.encoders={image: nature}"], "the 'nature' CNN needs at least 36x36 pixels, 'image' is 20x20"),
    (["model.encoders={nope: conv}"], "model.encoders: no observation key 'nope'; the env's keys are image, state"),
    (["model.encoders={state: onehot}"], "'onehot' needs an integer entry"),
    (["model.encoders={image: {type: conv, channels: [8, 8], kernels: [3]}}"], "must be as long as each other"),
]


@pytest.mark.parametrize("overrides,message", BAD, ids=[b[1][:30] for b in BAD])
def test_an_encoder_that_does_not_fit_the_entry_is_one_config_error(overrides, message):
    spec = {"image": TensorSpec((3, 20, 20), torch.uint8, 0.0, 255.0), "state": VECTOR}
    with pytest.raises(ConfigError) as err:
        make_policy(spec, Discrete(2), load_config(None, overrides))
    assert message in str(err.value) and "\n" not in str(err.value)

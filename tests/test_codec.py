import json
import pickle
import struct
import warnings

import numpy as np
import pytest
import torch
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rl_system.codec import VERSION, CodecError, decode, encode, stats

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]
SPECIALS = [0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e-30, 3.5]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def bits(t: torch.Tensor) -> torch.Tensor:
    """Integer view so NaN payloads and -0.0 compare bit for bit."""
    if t.dtype.is_floating_point:
        return t.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    n = int(np.prod(shape))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    kind = draw(st.sampled_from(["random", "const", "special", "rawbits"]))
    if dtype == torch.bool:
        t = torch.rand(n, generator=g) < 0.3
    elif kind == "rawbits":  # arbitrary bit patterns: NaN payloads, subnormals, everything
        k = dtype.itemsize
        t = torch.randint(0, 256, (n * k,), dtype=torch.uint8, generator=g).view(dtype)
    elif dtype.is_floating_point:
        t = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
        if kind == "const":
            t.fill_(draw(st.sampled_from(SPECIALS)))
        elif kind == "special" and n:
            idx = torch.randint(0, n, (max(1, n // 3),), generator=g)
            t[idx] = torch.tensor([SPECIALS[i % len(SPECIALS)] for i in range(len(idx))], dtype=dtype)
    else:
        info = torch.iinfo(dtype)
        lo, hi = (0, 2) if kind == "const" else (max(info.min, -1000), min(info.max, 1000))
        t = torch.randint(lo, hi, (n,), dtype=dtype, generator=g)
    t = t.reshape(shape)
    if draw(st.booleans()) and t.dim() >= 2:  # non-contiguous input
        t = t.transpose(0, 1)
    return t


columns_st = st.dictionaries(st.text(min_size=1, max_size=8), tensors(), max_size=5)
meta_st = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=10)
    | st.floats(allow_nan=False),
    lambda ch: st.lists(ch, max_size=3) | st.dictionaries(st.text(max_size=5), ch, max_size=3),
    max_leaves=10)
opts_st = st.fixed_dictionaries({
    "compression": st.sampled_from(["lz4", "none"]),
    "level": st.sampled_from([0, -4, 1, 9]),
    "shuffle": st.sampled_from([False, True, "auto"]),
})


def _payload(cols, meta=None, **kw):
    return encode(cols, meta if meta is not None else {"k": 1}, **kw)


@SETTINGS
@given(columns_st, st.dictionaries(st.text(max_size=5), meta_st, max_size=4), opts_st)
def test_roundtrip_bit_exact(cols, meta, opts):
    payload = encode(cols, meta, **opts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's "non-writable buffer" warning
        out, meta2 = decode(payload)
    assert meta2 == meta
    assert list(out) == list(cols)
    for name, t in cols.items():
        o = out[name]
        assert o.dtype == t.dtype and o.shape == t.shape and o.device.type == "cpu"
        assert torch.equal(bits(o), bits(t)), name
    s = stats(payload)
    assert {k: v["raw_bytes"] for k, v in s.items()} == {
        k: t.numel() * t.element_size() for k, t in cols.items()}
    assert decode(bytearray(payload))[1] == meta and decode(memoryview(payload))[1] == meta


def _sample_payload(**kw):
    g = torch.Generator().manual_seed(0)
    cols = {"obs": torch.cumsum(torch.randn(16, 8, 4, generator=g), 0),
            "action": torch.randint(0, 2, (16, 8), generator=g),
            "reward": torch.ones(16, 8), "done": torch.zeros(16, 8, dtype=torch.bool),
            "scalar": torch.tensor(2.5, dtype=torch.float64), "empty": torch.zeros(0, 3)}
    return encode(cols, {"step": 7, "env": "CartPole-v1"}, **kw)


PAYLOADS = [_sample_payload(), _sample_payload(shuffle=True, level=9), _sample_payload(compression="none")]


@SETTINGS
@given(st.sampled_from(range(len(PAYLOADS))), st.data())
def test_any_flipped_byte_is_detected(which, data):
    payload = bytearray(PAYLOADS[which])
    i = data.draw(st.integers(0, len(payload) - 1))
    payload[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CodecError):
        decode(payload)


@SETTINGS
@given(st.sampled_from(range(len(PAYLOADS))), st.data())
def test_truncation_at_any_length(which, data):
    payload = PAYLOADS[which]
    n = data.draw(st.integers(0, len(payload) - 1))
    with pytest.raises(CodecError):
        decode(payload[:n])
    with pytest.raises(CodecError):
        stats(payload[:n])


def test_exhaustive_truncation_and_flips_small():
    payload = _sample_payload()
    for n in range(len(payload)):
        with pytest.raises(CodecError):
            decode(payload[:n])
    for i in range(len(payload)):
        bad = bytearray(payload)
        bad[i] ^= 0x01
        with pytest.raises(CodecError):
            decode(bad)
    with pytest.raises(CodecError):
        decode(payload + b"\x00")


def _forge(header: dict, body: bytes = b"", version: int = VERSION, magic: bytes = b"RLRO") -> bytes:
    """Build a payload with a *valid* checksum, as an attacker could."""
    h = json.dumps(header).encode()
    return struct.pack("<4sHIQ", magic, version, len(h), xxhash.xxh3_64_intdigest(h + body)) + h + body


def test_wrong_magic_and_future_version():
    payload = bytearray(_sample_payload())
    with pytest.raises(CodecError, match="magic"):
        decode(b"XXXX" + payload[4:])
    future = bytearray(payload)
    struct.pack_into("<H", future, 4, VERSION + 1)
    with pytest.raises(CodecError, match="version"):
        decode(future)
    with pytest.raises(CodecError, match="magic"):
        decode(_forge({"meta": {}, "columns": []}, magic=b"RLR0"))
    with pytest.raises(CodecError, match="version"):
        decode(_forge({"meta": {}, "columns": []}, version=VERSION + 1))


class _Boom:
    def __reduce__(self):
        return (exec, ("import builtins; builtins._codec_pwned = True",))


def test_pickle_payload_never_executes(monkeypatch):
    import builtins
    evil = pickle.dumps(_Boom())
    assert not hasattr(builtins, "_codec_pwned")

    def no_pickle(*a, **k):
        raise AssertionError("pickle used during decode")
    monkeypatch.setattr(pickle, "loads", no_pickle)
    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "Unpickler", no_pickle)
    col = {"name": "x", "dtype": "uint8", "shape": [len(evil)], "nbytes": len(evil),
           "cbytes": len(evil), "filter": "none", "codec": "none"}
    # A well-formed payload whose body is a pickle: it comes back as plain bytes.
    out, _ = decode(_forge({"meta": {}, "columns": [col]}, evil))
    assert bytes(out["x"].numpy()) == evil
    # A pickle in place of the header, and a pickle as the whole payload.
    for bad in (struct.pack("<4sHIQ", b"RLRO", VERSION, len(evil), xxhash.xxh3_64_intdigest(evil)) + evil,
                evil, _forge({"meta": {"x": evil.hex()}, "columns": [dict(col, dtype="object")]}, evil)):
        with pytest.raises(CodecError):
            decode(bad)
    assert not hasattr(builtins, "_codec_pwned")


@pytest.mark.parametrize("mutate", [
    lambda c: c.update(nbytes=c["nbytes"] + 1),
    lambda c: c.update(shape=[-1]),
    lambda c: c.update(shape=[True]),
    lambda c: c.update(dtype="complex64"),
    lambda c: c.update(filter="rot13"),
    lambda c: c.update(codec="zstd"),
    lambda c: c.update(extra=1),
    lambda c: c.update(codec="lz4", nbytes=10**12, shape=[10**12]),  # decompression bomb
    lambda c: c.update(codec="lz4"),  # raw bytes are not a valid lz4 block
])
def test_forged_headers_rejected(mutate):
    body = bytes(range(16))
    col = {"name": "x", "dtype": "uint8", "shape": [16], "nbytes": 16, "cbytes": 16,
           "filter": "none", "codec": "none"}
    decode(_forge({"meta": {}, "columns": [col]}, body))  # sanity: the unmodified one is fine
    mutate(col)
    with pytest.raises(CodecError):
        decode(_forge({"meta": {}, "columns": [col]}, body))


def test_forged_misc_rejected():
    for shape in ([0, 10**30], [0] + [2**40] * 4, [0] * 100):  # zero-size, but absurd dims
        col = {"name": "x", "dtype": "int8", "shape": shape, "nbytes": 0, "cbytes": 0,
               "filter": "none", "codec": "none"}
        with pytest.raises(CodecError):
            decode(_forge({"meta": {}, "columns": [col]}))
    col = {"name": "x", "dtype": "bool", "shape": [2], "nbytes": 2, "cbytes": 2,
           "filter": "none", "codec": "none"}
    for header, body in [({"meta": {}, "columns": [col]}, b"\x00\x07"),      # bool byte not 0/1
                         ({"meta": {}, "columns": [col, col]}, b"\x00" * 4),  # duplicate names
                         ({"meta": [], "columns": []}, b""),                  # meta not a dict
                         ({"columns": []}, b""),
                         ({"meta": {}, "columns": [col]}, b"\x00")]:          # body too short
        with pytest.raises(CodecError):
            decode(_forge(header, body))
    import lz4.block
    short = lz4.block.compress(bytes(8), store_size=False)  # valid block, but only 8 bytes out
    col = {"name": "x", "dtype": "uint8", "shape": [16], "nbytes": 16, "cbytes": len(short),
           "filter": "none", "codec": "lz4"}
    with pytest.raises(CodecError):
        decode(_forge({"meta": {}, "columns": [col]}, short))
    h = b"{not json"
    with pytest.raises(CodecError, match="JSON"):
        decode(struct.pack("<4sHIQ", b"RLRO", VERSION, len(h), xxhash.xxh3_64_intdigest(h)) + h)


json_st = st.recursive(st.none() | st.booleans() | st.integers(-2, 2**40) | st.text(max_size=4),
                       lambda ch: st.lists(ch, max_size=3), max_leaves=5)
col_field_st = {
    "name": st.text(max_size=3) | json_st,
    "dtype": st.sampled_from(["uint8", "float32", "bool", "x"]) | json_st,
    "shape": st.lists(st.integers(-1, 9), max_size=3) | json_st, "nbytes": st.integers(-1, 40) | json_st,
    "cbytes": st.integers(-1, 40) | json_st, "filter": st.sampled_from(["none", "shuffle"]) | json_st,
    "codec": st.sampled_from(["none", "lz4"]) | json_st}


@SETTINGS
@given(st.lists(st.fixed_dictionaries(col_field_st), max_size=3), st.binary(max_size=64))
def test_fuzzed_headers_with_valid_checksum_only_raise_codec_error(cols, body):
    try:
        out, _ = decode(_forge({"meta": {}, "columns": cols}, body))
    except CodecError:
        return
    for c, t in zip(cols, out.values()):  # accepted: must agree with the header
        assert list(t.shape) == c["shape"] and t.numel() * t.element_size() == c["nbytes"]


def test_non_json_meta_and_bad_columns_rejected_on_encode():
    cols = {"a": torch.zeros(3)}
    for meta in ({"t": torch.zeros(1)}, {"s": {1, 2}}, {"o": object()}, ["not", "a", "dict"]):
        with pytest.raises((TypeError, CodecError)):
            encode(cols, meta)
    with pytest.raises(TypeError, match="dtype"):
        encode({"c": torch.zeros(2, dtype=torch.complex64)}, {})
    with pytest.raises(TypeError):
        encode({"c": [1, 2]}, {})
    with pytest.raises(ValueError):
        encode(cols, {}, compression="zstd")
    with pytest.raises(ValueError):
        encode(cols, {}, shuffle="sometimes")


def test_decoded_tensors_writable_and_own_memory():
    payload = _sample_payload(shuffle=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, meta = decode(payload)
    assert meta == {"step": 7, "env": "CartPole-v1"}
    out["obs"].add_(1)
    out["action"][0, 0] = 5
    assert out["empty"].shape == (0, 3) and out["scalar"].shape == () and out["scalar"].item() == 2.5


def test_stats_and_shuffle_recorded():
    payload = _sample_payload(shuffle=True)
    s = stats(payload)
    assert s["reward"]["raw_bytes"] == 16 * 8 * 4 and s["reward"]["ratio"] > 5
    assert s["obs"]["filter"] == "shuffle" and s["done"]["filter"] == "none"  # 1-byte dtypes never shuffled
    assert all(v["codec"] == "none" for v in stats(_sample_payload(compression="none")).values())
    assert len(_sample_payload(compression="none")) > len(payload)

"""Rollout wire format: columnar tensors + JSON meta -> bytes, and back.

Layout (all integers little-endian)::

    offset  size  field
    0       4     magic  b"RLRO"
    4       2     format version, u16 (currently 1)
    6       4     header length H in bytes, u32
    10      8     checksum, u64 = xxh3_64(header + body)
    18      H     header: UTF-8 JSON {"meta": {...}, "columns": [col, ...]}
    18+H    ...   body: the column blobs, back to back, in header order

Each ``col`` is ``{"name", "dtype", "shape", "nbytes", "cbytes", "filter",
"codec"}``: ``dtype`` is a name such as "float32", ``nbytes`` the raw size,
``cbytes`` the blob size, ``filter`` "none" or "shuffle" (bytes transposed
so byte 0 of every element comes first, then byte 1, ...; bit exact) and
``codec`` "none" (raw bytes) or "lz4" (LZ4 *block*, no size prefix; the
header carries the sizes).  A column that lz4 does not shrink is stored raw.
``encode(shuffle=True)`` shuffles every multi-byte column, ``"auto"`` only those
where it makes lz4 output >= 20% smaller on a 64 KiB sample.

Compression levels for "lz4": 0 = LZ4 default (fast); 1..12 = LZ4 HC at that
level (above 12 clamps to 12; much slower to compress, decompression as fast);
negative = LZ4 "fast" mode with acceleration ``-level`` (faster, worse ratio).

Decoding verifies magic, version, lengths and checksum before touching the
body, then every decompressed size.  It never uses pickle or eval; any bad
input raises ``CodecError``.  Meta travels as JSON (tuples come back as lists,
non-string keys as strings).  Tensors are stored in native little-endian order.
"""
from __future__ import annotations

import json
import math
import struct
import sys

import lz4.block
import numpy as np
import torch
import xxhash

__all__ = ["encode", "decode", "stats", "CodecError", "VERSION"]

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("rl_system.codec assumes a little-endian host")

MAGIC = b"RLRO"
VERSION = 1
_PREFIX = struct.Struct("<4sHIQ")  # magic, version, header length, checksum
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)}
_COL_KEYS = {"name", "dtype", "shape", "nbytes", "cbytes", "filter", "codec"}
_AUTO_SAMPLE = 1 << 16  # bytes tried both ways by shuffle="auto"


class CodecError(ValueError):
    """The payload is corrupt, truncated, of an unknown version or malformed."""


def _shuffle(raw: np.ndarray, k: int) -> np.ndarray:
    """[e0b0 e0b1 .. e1b0 e1b1 ..] -> [e0b0 e1b0 .. e0b1 e1b1 ..] (numpy beats torch here)."""
    return np.ascontiguousarray(raw.reshape(-1, k).T).reshape(-1)


def _unshuffle(u8: torch.Tensor, k: int) -> torch.Tensor:
    out, planes = torch.empty(u8.numel() // k, k, dtype=torch.uint8), u8.view(k, -1)
    for j in range(k):  # k <= 8 strided byte-plane copies; ~10x faster than .t().contiguous()
        out[:, j] = planes[j]
    return out.view(-1)


def _lz4(buf, level: int) -> bytes:
    if level > 0:
        return lz4.block.compress(buf, mode="high_compression",
                                  compression=min(level, 12), store_size=False)
    if level < 0:
        return lz4.block.compress(buf, mode="fast", acceleration=-level, store_size=False)
    return lz4.block.compress(buf, store_size=False)


def _want_shuffle(raw: np.ndarray, k: int, level: int) -> bool:
    """shuffle="auto": lz4 a 64 KiB prefix both ways; shuffle only if it saves >= 20%
    (unshuffling costs decode speed, so small gains are not worth it)."""
    head = raw[: _AUTO_SAMPLE - _AUTO_SAMPLE % k]
    return len(_lz4(_shuffle(head, k), level)) <= 0.8 * len(_lz4(head, level))


def encode(columns: dict[str, torch.Tensor], meta: dict, *, compression: str = "lz4",
           level: int = 0, shuffle: bool | str = False) -> bytes:
    """Serialise ``columns`` (name -> tensor) and JSON-able ``meta`` to bytes."""
    if compression not in ("lz4", "none"):
        raise ValueError(f"compression must be 'lz4' or 'none', got {compression!r}")
    if shuffle not in (False, True, "auto"):
        raise ValueError(f"shuffle must be False, True or 'auto', got {shuffle!r}")
    if not isinstance(level, int) or isinstance(level, bool):
        raise TypeError(f"level must be an int, got {level!r}")
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
    cols, blobs = [], []
    for name, t in columns.items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise TypeError(f"columns must map str -> torch.Tensor, got {name!r}: {type(t).__name__}")
        dname = str(t.dtype).removeprefix("torch.")
        if dname not in _DTYPES or t.layout != torch.strided:
            raise TypeError(f"column {name!r}: unsupported dtype/layout {t.dtype}/{t.layout}; "
                            f"supported dtypes: {', '.join(_DTYPES)}")
        t = t.detach().to("cpu").contiguous()
        k = t.element_size()
        raw = t.reshape(-1).view(torch.uint8).numpy()  # shares memory with t
        filt = "none"
        if k > 1 and raw.size and (shuffle is True or (
                shuffle == "auto" and compression == "lz4" and _want_shuffle(raw, k, level))):
            raw, filt = _shuffle(raw, k), "shuffle"
        blob, codec = raw, "none"
        if compression == "lz4" and raw.nbytes:
            c = _lz4(raw, level)
            if len(c) < raw.nbytes:
                blob, codec = c, "lz4"
        blobs.append(blob)
        cols.append({"name": name, "dtype": dname, "shape": list(t.shape), "nbytes": raw.nbytes,
                     "cbytes": len(memoryview(blob).cast("B")), "filter": filt, "codec": codec})
    try:
        header = json.dumps({"meta": meta, "columns": cols}, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:
        raise TypeError(f"meta is not JSON-serialisable: {e}") from e
    if len(header) >= 1 << 32:
        raise ValueError("header too large")
    h = xxhash.xxh3_64(header)
    for b in blobs:
        h.update(b)
    return b"".join([_PREFIX.pack(MAGIC, VERSION, len(header), h.intdigest()), header, *blobs])


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _check_col(c) -> None:
    if not isinstance(c, dict) or set(c) != _COL_KEYS:
        raise CodecError(f"bad column entry in header: {c!r:.200}")
    shape = c["shape"]
    if not (isinstance(c["name"], str) and isinstance(c["dtype"], str) and c["dtype"] in _DTYPES
            and isinstance(shape, list) and len(shape) <= 64 and all(map(_is_int, shape))
            and math.prod(max(d, 1) for d in shape) < 2**62  # torch's stride arithmetic
            and _is_int(c["nbytes"]) and _is_int(c["cbytes"])
            and c["filter"] in ("none", "shuffle") and c["codec"] in ("none", "lz4")):
        raise CodecError(f"bad column entry in header: {c!r:.200}")
    itemsize = _DTYPES[c["dtype"]].itemsize
    if c["nbytes"] != math.prod(shape) * itemsize:
        raise CodecError(f"column {c['name']!r}: nbytes {c['nbytes']} does not match shape {shape}")
    if c["codec"] == "none" and c["cbytes"] != c["nbytes"]:
        raise CodecError(f"column {c['name']!r}: raw column with cbytes != nbytes")
    # LZ4 cannot expand more than ~255x: refuse decompression bombs before allocating.
    if c["codec"] == "lz4" and not (0 < c["cbytes"] and c["nbytes"] <= 256 * c["cbytes"] + 64):
        raise CodecError(f"column {c['name']!r}: impossible lz4 sizes {c['cbytes']} -> {c['nbytes']}")


def _parse(payload) -> tuple[memoryview, dict, int]:
    """Check prefix, lengths, checksum and header; return (view, header, body offset)."""
    try:
        mv = memoryview(payload).cast("B")
    except TypeError as e:
        raise TypeError(f"payload must be a contiguous bytes-like object: {e}") from None
    if len(mv) < _PREFIX.size:
        raise CodecError(f"payload truncated: {len(mv)} bytes is shorter than the {_PREFIX.size}-byte prefix")
    magic, version, hlen, checksum = _PREFIX.unpack_from(mv)
    if magic != MAGIC:
        raise CodecError(f"bad magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise CodecError(f"unsupported format version {version} (this reader knows {VERSION})")
    start = _PREFIX.size + hlen
    if start > len(mv):
        raise CodecError(f"payload truncated: header needs {hlen} bytes, {len(mv) - _PREFIX.size} present")
    if xxhash.xxh3_64_intdigest(mv[_PREFIX.size:]) != checksum:
        raise CodecError("checksum mismatch: payload is corrupt or truncated")
    try:
        header = json.loads(mv[_PREFIX.size:start].tobytes())
    except (ValueError, RecursionError) as e:
        raise CodecError(f"header is not valid JSON: {e}") from None
    if not (isinstance(header, dict) and set(header) == {"meta", "columns"}
            and isinstance(header["meta"], dict) and isinstance(header["columns"], list)):
        raise CodecError("header must be an object with 'meta' (object) and 'columns' (list)")
    for c in header["columns"]:
        _check_col(c)
    names = [c["name"] for c in header["columns"]]
    if len(set(names)) != len(names):
        raise CodecError("duplicate column names in header")
    body = sum(c["cbytes"] for c in header["columns"])
    if body != len(mv) - start:
        raise CodecError(f"body length {len(mv) - start} does not match header total {body}")
    return mv, header, start


def decode(payload: bytes | bytearray | memoryview) -> tuple[dict[str, torch.Tensor], dict]:
    """Inverse of :func:`encode`: return (columns, meta); tensors are writable and CPU."""
    mv, header, pos = _parse(payload)
    out = {}
    for c in header["columns"]:
        src, n = mv[pos:pos + c["cbytes"]], c["nbytes"]
        pos += c["cbytes"]
        dtype, shape = _DTYPES[c["dtype"]], c["shape"]
        if n == 0:
            out[c["name"]] = torch.empty(shape, dtype=dtype)
            continue
        if c["codec"] == "lz4":
            try:
                buf = lz4.block.decompress(src, uncompressed_size=n, return_bytearray=True)
            except lz4.block.LZ4BlockError as e:
                raise CodecError(f"column {c['name']!r}: lz4 decompression failed: {e}") from None
            if len(buf) != n:
                raise CodecError(f"column {c['name']!r}: decompressed {len(buf)} bytes, header says {n}")
        else:
            buf = bytearray(src)
        u8 = torch.frombuffer(buf, dtype=torch.uint8)  # owns the bytearray: no copy, writable
        if c["filter"] == "shuffle":
            u8 = _unshuffle(u8, dtype.itemsize)
        if dtype == torch.bool and int(u8.max()) > 1:
            raise CodecError(f"column {c['name']!r}: bool column holds bytes other than 0/1")
        out[c["name"]] = u8.view(dtype).view(shape)
    return out, header["meta"]


def stats(payload: bytes | bytearray | memoryview) -> dict[str, dict]:
    """Per-column sizes from the header (checksum verified, nothing decompressed)."""
    _, header, _ = _parse(payload)
    return {c["name"]: {"dtype": c["dtype"], "shape": c["shape"], "raw_bytes": c["nbytes"],
                        "compressed_bytes": c["cbytes"],
                        "ratio": c["nbytes"] / c["cbytes"] if c["cbytes"] else 1.0,
                        "filter": c["filter"], "codec": c["codec"]} for c in header["columns"]}

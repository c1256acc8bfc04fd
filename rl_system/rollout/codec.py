"""Rollout wire format: columnar tensors + JSON meta -> bytes, and back.

Layout (all integers little-endian)::

    offset  size  field
    0       4     magic  b"RLRO"
    4       2     format version, u16 (currently 2; version 1 payloads are still read)
    6       4     header length H in bytes, u32
    10      8     checksum, u64 = xxh3_64(header + body)
    18      H     header: UTF-8 JSON {"meta": {...}, "columns": [col, ...]}
    18+H    ...   body: the column blobs, back to back, in header order

Each ``col`` is ``{"name", "dtype", "shape", "nbytes", "cbytes", "filters", "codec"}``:
``dtype`` is the tensor's dtype name (e.g. "float32") and ``shape`` its shape; ``filters`` the
list of bit-exact preconditioning steps applied on encode, in this order (undone in reverse):

* ``"narrow:<int>"``: an int16/int32/int64 column is stored as the smallest integer type that
  holds its range (``uint8``, ``int8``, ``uint16``, ``int16``, ``uint32``, ``int32``; e.g.
  int64 actions 0..11 -> uint8) and widened back on decode;
* ``"xor"``: delta along axis 0 (time, for ``[T, N, ...]`` columns): row ``t >= 1`` is XORed
  with row ``t - 1``, on the elements' bit patterns (exact for any float, NaN payloads included);
* ``"shuffle"``: bytes transposed so byte 0 of every element comes first, then byte 1, ...

``nbytes`` is the size of the filtered bytes (elements x the stored itemsize: the narrowed one
if any), ``cbytes`` the blob size, ``codec`` "none" (raw bytes) or "lz4" (LZ4 *block*, no size
prefix; the header carries the sizes).  A column that lz4 does not shrink is stored raw.

``encode(filters="auto")`` (the default) narrows every integer column it can and, for each
column, lz4-compresses plain / shuffle / xor / xor+shuffle bytes of a <= 64 KiB sample (xor only
for columns of >= 2 dimensions, i.e. [T, N, ...]), keeping a filter only where it saves more
bytes than its time is worth on a 1 Gbit/s link (10% of the column's bytes for shuffle, 2% for
xor); ``filters="none"`` stores plain bytes; an explicit list such as ``("xor", "shuffle")``
applies those filters wherever they apply.
Filters are only chosen automatically when compressing: with ``compression="none"`` (one node,
shared memory) "auto" means none.  docs/wire_cost.md has the measurements behind these choices.

Compression levels for "lz4": 0 = LZ4 default (fast); 1..12 = LZ4 HC at that
level (above 12 clamps to 12; much slower to compress, decompression as fast);
negative = LZ4 "fast" mode with acceleration ``-level`` (faster, worse ratio).

Version 1 (written until the filters above were added) had ``"filter": "none" | "shuffle"`` in
place of ``filters`` and ``nbytes`` always the raw size; :func:`decode` still reads it.

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
from collections.abc import Sequence

import lz4.block
import numpy as np
import torch
import xxhash

__all__ = ["encode", "decode", "stats", "CodecError", "VERSION", "FILTERS"]

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("rl_system.rollout.codec assumes a little-endian host")

MAGIC = b"RLRO"
VERSION = 2
_READS = (1, 2)  # format versions decode() understands
_PREFIX = struct.Struct("<4sHIQ")  # magic, version, header length, checksum
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)}
_COL_KEYS = {1: {"name", "dtype", "shape", "nbytes", "cbytes", "filter", "codec"},
             2: {"name", "dtype", "shape", "nbytes", "cbytes", "filters", "codec"}}
FILTERS = ("narrow", "xor", "shuffle")  # names for encode(filters=[...]), in the order applied
_NARROW_TO = ("uint8", "int8", "uint16", "int16", "uint32", "int32")  # smallest first
_NARROW_FROM = ("int16", "int32", "int64")
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_AUTO_SAMPLE = 1 << 16  # bytes tried each way by filters="auto" (4 windows of 16 KiB)
_AUTO_WINDOWS = 4
# filters="auto" keeps a filter only if it saves this fraction of the column's bytes: about what
# the filter's encode + decode time is worth on a 1 Gbit/s link (8 ns/byte), at the filter speeds
# docs/wire_cost.md gives.
_AUTO_COST = {"shuffle": 0.10, "xor": 0.02}


class CodecError(ValueError):
    """The payload is corrupt, truncated, of an unknown version or malformed."""


# --- filters: numpy on uint8 byte arrays; k = itemsize of the stored elements -------------

def _shuffle(u8: np.ndarray, k: int) -> np.ndarray:
    """[e0b0 e0b1 .. e1b0 e1b1 ..] -> [e0b0 e1b0 .. e0b1 e1b1 ..] (k strided plane copies:
    numpy beats both torch and a transposed ascontiguousarray here)."""
    out, elems = np.empty((k, u8.size // k), np.uint8), u8.reshape(-1, k)
    for j in range(k):
        out[j] = elems[:, j]
    return out.reshape(-1)


def _unshuffle(u8: np.ndarray, k: int) -> np.ndarray:
    out, planes = np.empty((u8.size // k, k), np.uint8), u8.reshape(k, -1)
    for j in range(k):
        out[:, j] = planes[j]
    return out.reshape(-1)


def _xor(u8: np.ndarray, k: int, rows: int) -> np.ndarray:
    """Row t >= 1 of the [rows, -1] element matrix XOR row t - 1 (a new array)."""
    e = u8.view(_UINT[k]).reshape(rows, -1)
    out = np.empty_like(e)
    out[0] = e[0]
    np.bitwise_xor(e[1:], e[:-1], out=out[1:])
    return out.reshape(-1).view(np.uint8)


def _unxor(u8: np.ndarray, k: int, rows: int) -> None:
    """Inverse of :func:`_xor`, in place (a running XOR down the rows)."""
    e = u8.view(_UINT[k]).reshape(rows, -1)
    if e.shape[1] >= 64:  # few wide rows: one vector op per row (accumulate strides badly)
        for t in range(1, rows):
            np.bitwise_xor(e[t], e[t - 1], out=e[t])
    else:  # many narrow rows
        np.bitwise_xor.accumulate(e, axis=0, out=e)


def _narrowest(lo: int, hi: int, itemsize: int) -> str | None:
    for name in _NARROW_TO:
        info = np.iinfo(name)
        if info.min <= lo and hi <= info.max:
            return name if info.bits // 8 < itemsize else None
    return None


def _lz4(buf, level: int) -> bytes:
    if level > 0:
        return lz4.block.compress(buf, mode="high_compression",
                                  compression=min(level, 12), store_size=False)
    if level < 0:
        return lz4.block.compress(buf, mode="fast", acceleration=-level, store_size=False)
    return lz4.block.compress(buf, store_size=False)


def _windows(u8: np.ndarray, k: int, rows: int) -> tuple[np.ndarray, np.ndarray | None]:
    """filters="auto"'s sample of a column larger than _AUTO_SAMPLE: _AUTO_WINDOWS windows of
    whole elements from the middle of each quarter (never in row 0, which "xor" leaves as is),
    and the same windows XORed with the row before (byte XOR = element XOR), or None if rows < 2."""
    w, n = _AUTO_SAMPLE // _AUTO_WINDOWS // k * k, u8.size
    row = n // rows if rows >= 2 else 0
    starts = [min(max(((2 * i + 1) * n // (2 * _AUTO_WINDOWS) - w // 2) // k * k, row), n - w)
              for i in range(_AUTO_WINDOWS)]
    plain = np.concatenate([u8[s:s + w] for s in starts])
    if not row:
        return plain, None
    return plain, np.concatenate([u8[s:s + w] ^ u8[s - row:s - row + w] for s in starts])


def _choose(u8: np.ndarray, k: int, rows: int, level: int) -> tuple[tuple[str, ...], np.ndarray, bytes | None]:
    """filters="auto" for one column of ``rows`` time steps: of plain, shuffle, xor and
    xor+shuffle, the one with the smallest lz4 output plus _AUTO_COST x the bytes per filter,
    judged on the whole column up to _AUTO_SAMPLE bytes, else on a sample of that size.
    Returns (filters, the filtered bytes, their lz4 block when already computed, else None)."""
    cands = [()]
    if k > 1:
        cands.append(("shuffle",))
    if rows >= 2:
        cands += [("xor",), ("xor", "shuffle")] if k > 1 else [("xor",)]
    if len(cands) == 1:
        return (), u8, None
    whole = u8.size <= _AUTO_SAMPLE
    plain, xored = (u8, _xor(u8, k, rows) if rows >= 2 else None) if whole else _windows(u8, k, rows)
    best = None
    for c in cands:
        f = xored if "xor" in c else plain
        if "shuffle" in c:
            f = _shuffle(f, k)
        blob = _lz4(f, level)
        score = min(len(blob), f.size) + f.size * sum(_AUTO_COST[x] for x in c)
        if best is None or score < best[0]:
            best = (score, c, f, blob)
    _, chain, f, blob = best
    if whole:
        return chain, f, blob
    f = _xor(u8, k, rows) if "xor" in chain else u8
    return chain, (_shuffle(f, k) if "shuffle" in chain else f), None


def _filter_arg(filters) -> str | frozenset:
    if isinstance(filters, str):
        if filters not in ("auto", "none"):
            raise ValueError(f"filters must be 'auto', 'none' or a list of {FILTERS}, got {filters!r}")
        return filters
    if not isinstance(filters, Sequence) or not set(filters) <= set(FILTERS):
        raise ValueError(f"filters must be 'auto', 'none' or a list of {FILTERS}, got {filters!r}")
    return frozenset(filters)


def encode(columns: dict[str, torch.Tensor], meta: dict, *, compression: str = "lz4",
           level: int = 0, filters: str | Sequence[str] = "auto") -> bytes:
    """Serialise ``columns`` (name -> tensor) and JSON-able ``meta`` to bytes."""
    if compression not in ("lz4", "none"):
        raise ValueError(f"compression must be 'lz4' or 'none', got {compression!r}")
    mode = _filter_arg(filters)
    if mode == "auto" and compression == "none":
        mode = "none"
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
        k, n = t.element_size(), t.numel()
        raw = t.reshape(-1).view(torch.uint8).numpy()  # shares memory with t
        chain, blob = [], None
        if n and mode != "none":
            if dname in _NARROW_FROM and (mode == "auto" or "narrow" in mode):
                wire = _narrowest(int(t.min()), int(t.max()), k)
                if wire:
                    raw = t.reshape(-1).numpy().astype(wire).view(np.uint8)
                    k = raw.size // n
                    chain.append(f"narrow:{wire}")
            rows = t.shape[0] if t.dim() else 1
            if mode == "auto":
                if compression == "lz4":
                    picked, raw, blob = _choose(raw, k, rows if t.dim() >= 2 else 1, level)
                    chain += picked
            else:
                if "xor" in mode and t.dim() >= 1 and rows >= 2:
                    raw = _xor(raw, k, rows)
                    chain.append("xor")
                if "shuffle" in mode and k > 1:
                    raw = _shuffle(raw, k)
                    chain.append("shuffle")
        codec = "none"
        if compression == "lz4" and raw.nbytes:
            c = blob if blob is not None else _lz4(raw, level)
            if len(c) < raw.nbytes:
                raw, codec = c, "lz4"
        blobs.append(raw)
        cols.append({"name": name, "dtype": dname, "shape": list(t.shape),
                     "nbytes": n * k, "cbytes": len(memoryview(raw).cast("B")),
                     "filters": chain, "codec": codec})
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


def _wire_itemsize(c: dict) -> int:
    """Check ``c["filters"]`` (order, applicability); return the stored itemsize."""
    dtype, chain = c["dtype"], c["filters"]
    itemsize = _DTYPES[dtype].itemsize
    if not isinstance(chain, list) or not all(isinstance(f, str) for f in chain):
        raise CodecError(f"column {c['name']!r}: filters must be a list of strings, got {chain!r:.100}")
    rest = chain
    if rest and rest[0].startswith("narrow:"):
        wire = rest[0][7:]
        if not (dtype in _NARROW_FROM and wire in _NARROW_TO and np.dtype(wire).itemsize < itemsize):
            raise CodecError(f"column {c['name']!r}: cannot narrow {dtype} to {wire!r}")
        itemsize, rest = np.dtype(wire).itemsize, rest[1:]
    if rest[:1] == ["xor"]:
        if not c["shape"]:
            raise CodecError(f"column {c['name']!r}: 'xor' filter on a 0-d column")
        rest = rest[1:]
    if rest not in ([], ["shuffle"]):
        raise CodecError(f"column {c['name']!r}: bad filter list {chain!r:.100} "
                         "(expected [narrow:<int>], [xor], [shuffle], in this order)")
    return itemsize


def _check_col(c, version: int) -> None:
    if not isinstance(c, dict) or set(c) != _COL_KEYS[version]:
        raise CodecError(f"bad column entry in header: {c!r:.200}")
    if version == 1:  # v1: "filter": "none" | "shuffle", on the raw bytes
        if c["filter"] not in ("none", "shuffle"):
            raise CodecError(f"bad column entry in header: {c!r:.200}")
        c["filters"] = [] if c.pop("filter") == "none" else ["shuffle"]
    shape = c["shape"]
    if not (isinstance(c["name"], str) and isinstance(c["dtype"], str) and c["dtype"] in _DTYPES
            and isinstance(shape, list) and len(shape) <= 64 and all(map(_is_int, shape))
            and math.prod(max(d, 1) for d in shape) < 2**62  # torch's stride arithmetic
            and _is_int(c["nbytes"]) and _is_int(c["cbytes"]) and c["codec"] in ("none", "lz4")):
        raise CodecError(f"bad column entry in header: {c!r:.200}")
    if c["nbytes"] != math.prod(shape) * _wire_itemsize(c):
        raise CodecError(f"column {c['name']!r}: nbytes {c['nbytes']} does not match shape {shape} "
                         f"and filters {c['filters']}")
    if c["codec"] == "none" and c["cbytes"] != c["nbytes"]:
        raise CodecError(f"column {c['name']!r}: raw column with cbytes != nbytes")
    # LZ4 cannot expand more than ~255x: refuse decompression bombs before allocating.
    if c["codec"] == "lz4" and not (0 < c["cbytes"] and c["nbytes"] <= 256 * c["cbytes"] + 64):
        raise CodecError(f"column {c['name']!r}: impossible lz4 sizes {c['cbytes']} -> {c['nbytes']}")


def _parse(payload) -> tuple[memoryview, dict, int]:
    """Check prefix, lengths, checksum and header; return (view, header, body offset).
    Column entries come back in the version-2 form whatever the payload's version."""
    try:
        mv = memoryview(payload).cast("B")
    except TypeError as e:
        raise TypeError(f"payload must be a contiguous bytes-like object: {e}") from None
    if len(mv) < _PREFIX.size:
        raise CodecError(f"payload truncated: {len(mv)} bytes is shorter than the {_PREFIX.size}-byte prefix")
    magic, version, hlen, checksum = _PREFIX.unpack_from(mv)
    if magic != MAGIC:
        raise CodecError(f"bad magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version not in _READS:
        raise CodecError(f"unsupported format version {version} (this reader knows "
                         f"{', '.join(map(str, _READS))})")
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
        _check_col(c, version)
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
        dtype, shape, chain = _DTYPES[c["dtype"]], c["shape"], c["filters"]
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
        u8 = np.frombuffer(buf, dtype=np.uint8)  # writable view of the bytearray: no copy
        k = n // math.prod(shape)
        if chain and chain[-1] == "shuffle":
            u8 = _unshuffle(u8, k)
        if "xor" in chain:
            _unxor(u8, k, shape[0])
        if chain and chain[0].startswith("narrow:"):
            u8 = u8.view(chain[0][7:]).astype(c["dtype"]).view(np.uint8)
        if dtype == torch.bool and int(u8.max()) > 1:
            raise CodecError(f"column {c['name']!r}: bool column holds bytes other than 0/1")
        out[c["name"]] = torch.from_numpy(u8).view(dtype).view(shape)
    return out, header["meta"]


def stats(payload: bytes | bytearray | memoryview) -> dict[str, dict]:
    """Per-column sizes from the header (checksum verified, nothing decompressed)."""
    _, header, _ = _parse(payload)
    out = {}
    for c in header["columns"]:
        raw = math.prod(c["shape"]) * _DTYPES[c["dtype"]].itemsize
        out[c["name"]] = {"dtype": c["dtype"], "shape": c["shape"], "raw_bytes": raw,
                          "wire_bytes": c["nbytes"], "compressed_bytes": c["cbytes"],
                          "ratio": raw / c["cbytes"] if c["cbytes"] else 1.0,
                          "filters": c["filters"], "codec": c["codec"]}
    return out

"""Training checkpoints: the file format and reading one file (no Ray here; the directory of
checkpoints is :mod:`.store`, the writer actor :mod:`.writer`, finding what to resume :mod:`.resume`).

A checkpoint is a nested dict ``state`` of tensors and plain values (dict/list/tuple/str/int/float/
bool/None): model weights, optimizer state_dict, normaliser buffers, counters, RNG states, the
resolved config, metrics.

File layout (integers little-endian)::

    offset  size  field
    0       4     magic b"RLCK"
    4       2     format version, u16 (currently 1)
    6       4     manifest length M, u32
    10      8     xxh3_64(manifest bytes), u64
    18      M     manifest: UTF-8 JSON (see below)
    18+M    C     payload: ``torch.save(state)`` bytes, LZ4-frame compressed (or raw, see
                  ``compression``); C = manifest["compressed_bytes"], and the file ends there

The manifest holds ``format_version, policy_version, env_steps, round, mean_return, created``
(unix time), ``raw_bytes, compressed_bytes, checksum`` (``"xxh3_64:<16 hex>"`` of the
compressed payload), ``compression`` (``"lz4.frame"`` or ``"none"``, see below),
``torch_version`` and any extra JSON fields the caller passed (non-finite floats become ``null``).
Because the manifest has its own checksum and the payload is covered by the manifest's, any
flipped or missing byte is detected before unpickling; :func:`read_manifest` reads only the first 18 + M bytes.

Compression (measured with ``bench/bench_checkpoint.py``; details in its docstring): LZ4 *frame*
rather than block (same ratio, slightly faster with 4 MiB blocks, no 2 GiB input limit, records
the content size). But fp32 weights and Adam moments are incompressible for LZ4 (ratio 1.000 on
realistic nn.Linear weights + moments) while LZ4 costs 0.5-1.5 s per 300 MB on a busy core each
way. So the default ``compression="auto"`` LZ4-compresses a few samples of the serialised state
and uses ``"lz4.frame"`` only if they shrink by >= 10%, else ``"none"``; the choice is recorded
in the manifest. ``"lz4.frame"`` / ``"none"`` force one or the other.

Loading auto-detects this format or a plain ``torch.save`` zip file (starts with b"PK"). Both are
unpickled with ``torch.load(weights_only=True)``: only tensors and plain containers/scalars are
rebuilt, a pickle that references any other global (``os.system``, a ``__reduce__`` payload) is
refused before anything runs. :meth:`CheckpointStore.save` checks the same allow-list up front, so
a state that could not be loaded back is never written. Every problem with a file's content is a
:class:`CheckpointError` whose one-line message names the file.

Files are read from a path or any ``pyarrow.fs`` URI (:func:`load_checkpoint`, :func:`read_manifest`);
a directory of them with atomic writes and pruning is :class:`.store.CheckpointStore`.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import random
import struct
import time
from typing import Any

import lz4.block
import lz4.frame
import pyarrow.fs as pafs
import torch
import xxhash

from rl_system.errors import one_line
from rl_system.filesystems import resolve

__all__ = ["CheckpointError", "encode", "decode", "load_checkpoint",
           "read_manifest", "checkpoint_name", "capture_rng_state", "restore_rng_state",
           "MAGIC", "FORMAT_VERSION"]

MAGIC = b"RLCK"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<4sHIQ")  # magic, format version, manifest length, xxh3_64(manifest)
_ZIP_MAGIC = b"PK"
_MAX_MANIFEST = 1 << 24  # 16 MiB: anything larger is a corrupt length field
COMPRESSIONS = ("auto", "lz4.frame", "none")
_AUTO_SAMPLES, _AUTO_SAMPLE_BYTES, _AUTO_MIN_SAVING = 8, 1 << 18, 0.10
_RESERVED = {"format_version", "raw_bytes", "compressed_bytes", "checksum", "compression", "created",
             "torch_version"}


class CheckpointError(RuntimeError):
    """A checkpoint file is corrupt, truncated, of an unknown kind, unsafe, or cannot be written.
    The message is one line and names the file."""


def checkpoint_name(policy_version: int) -> str:
    return f"ckpt-v{policy_version:08d}.rlck"


# -- format ------------------------------------------------------------------------------------
def _jsonable(value: Any) -> Any:
    """Non-finite floats -> None (JSON has no NaN); tuples -> lists; everything else as is."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def serialize_state(state: dict[str, Any]) -> memoryview:
    """``torch.save(state)`` bytes, refused (ValueError) if ``weights_only`` loading would reject them."""
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint state must be a dict, got {type(state).__name__}")
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(buf)
    if unsafe:
        raise ValueError("checkpoint state holds objects that weights_only loading refuses: "
                         f"{', '.join(sorted(unsafe))} (store tensors / plain dicts, lists, numbers instead)")
    return buf.getbuffer()


def _lz4_saving(raw: memoryview) -> float:
    """Fraction LZ4 saves on a few evenly spaced samples (the whole buffer if it is small)."""
    n = len(raw)
    if n <= _AUTO_SAMPLES * _AUTO_SAMPLE_BYTES:
        samples = [raw]
    else:
        step = (n - _AUTO_SAMPLE_BYTES) // (_AUTO_SAMPLES - 1)
        samples = [raw[i * step:i * step + _AUTO_SAMPLE_BYTES] for i in range(_AUTO_SAMPLES)]
    total = sum(len(x) for x in samples)
    packed = sum(len(lz4.block.compress(x, store_size=False)) for x in samples)
    return 1.0 - packed / max(total, 1)


def encode(state: dict[str, Any], manifest_fields: dict[str, Any],
           compression: str = "auto") -> tuple[bytes, Any, dict[str, Any]]:
    """Returns ``(header, payload, manifest)``; the file is ``header + payload`` (kept apart so a
    large payload is never copied just to prepend a few bytes)."""
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    clash = _RESERVED & set(manifest_fields)
    if clash:
        raise ValueError(f"manifest fields {sorted(clash)} are set by the checkpoint writer")
    if "policy_version" not in manifest_fields:
        raise ValueError("manifest_fields must contain policy_version")
    raw = serialize_state(state)
    if compression == "auto":
        compression = "lz4.frame" if _lz4_saving(raw) >= _AUTO_MIN_SAVING else "none"
    if compression == "lz4.frame":
        payload = lz4.frame.compress(raw, block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=False,
                                     store_size=True)
    else:
        payload = raw
    manifest = {"format_version": FORMAT_VERSION, "policy_version": int(manifest_fields["policy_version"]),
                "env_steps": None, "round": None, "mean_return": None}
    manifest.update(_jsonable(dict(manifest_fields)))
    manifest["policy_version"] = int(manifest_fields["policy_version"])
    manifest.update(created=time.time(), raw_bytes=len(raw), compressed_bytes=len(payload),
                    checksum=f"xxh3_64:{xxhash.xxh3_64_intdigest(payload):016x}", compression=compression,
                    torch_version=torch.__version__)
    try:
        mbytes = json.dumps(manifest, allow_nan=False, sort_keys=True).encode()
    except TypeError as err:
        raise ValueError(f"manifest fields must be JSON values: {err}") from None
    header = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(mbytes), xxhash.xxh3_64_intdigest(mbytes)) + mbytes
    return header, payload, manifest


def _parse_head(head: bytes, name: str, file_size: int) -> tuple[dict[str, Any], int] | None:
    """Validates the prefix + manifest. ``head`` must hold at least the prefix and, if it does not
    hold the manifest too, ``None`` is returned with nothing else checked. Returns ``(manifest,
    payload offset)``."""
    if len(head) < _PREFIX.size:
        raise CheckpointError(f"{name}: truncated checkpoint ({file_size} bytes, header needs {_PREFIX.size})")
    magic, version, mlen, mhash = _PREFIX.unpack_from(head)
    if magic != MAGIC:
        raise CheckpointError(f"{name}: not a checkpoint (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{name}: unsupported checkpoint format version {version} (this code reads "
                              f"{FORMAT_VERSION})")
    if mlen > _MAX_MANIFEST or _PREFIX.size + mlen > file_size:
        raise CheckpointError(f"{name}: truncated or corrupt checkpoint (manifest length {mlen}, file "
                              f"{file_size} bytes)")
    if len(head) < _PREFIX.size + mlen:
        return None
    mbytes = bytes(head[_PREFIX.size:_PREFIX.size + mlen])
    if xxhash.xxh3_64_intdigest(mbytes) != mhash:
        raise CheckpointError(f"{name}: corrupt checkpoint (manifest checksum mismatch)")
    try:
        manifest = json.loads(mbytes)
        expected = _PREFIX.size + mlen + int(manifest["compressed_bytes"])
        manifest["raw_bytes"], manifest["checksum"], manifest["compression"]  # noqa: B018 - presence check
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{name}: corrupt checkpoint manifest ({one_line(err)})") from None
    if file_size != expected:
        what = "truncated" if file_size < expected else "trailing bytes after payload in"
        raise CheckpointError(f"{name}: {what} checkpoint ({file_size} bytes, expected {expected})")
    return manifest, _PREFIX.size + mlen


def _sniff(head: bytes, size: int, name: str) -> str:
    """"rlck" or "zip" from the first 4 bytes; anything else is a CheckpointError."""
    if size == 0:
        raise CheckpointError(f"{name}: empty file")
    if head[:2] == _ZIP_MAGIC:
        return "zip"
    if head == MAGIC:
        return "rlck"
    if size < len(MAGIC) and MAGIC.startswith(head):
        raise CheckpointError(f"{name}: truncated checkpoint ({size} bytes)")
    raise CheckpointError(f"{name}: unknown file format (starts with {head!r}; expected {MAGIC!r} or a "
                          "torch.save zip)")


def _zip_manifest(size: int) -> dict[str, Any]:
    return {"format": "torch.save", "format_version": None, "policy_version": None, "compression": "none",
            "raw_bytes": size, "compressed_bytes": size}


def _torch_load(raw: Any, name: str, map_location: Any) -> dict[str, Any]:
    try:
        state = torch.load(io.BytesIO(raw), map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many types for bad zips / refused pickles
        if isinstance(err, pickle.UnpicklingError):
            raise CheckpointError(f"{name}: refused unsafe or corrupt pickle ({one_line(err)})") from None
        raise CheckpointError(f"{name}: corrupt torch payload ({type(err).__name__}: {one_line(err)})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{name}: payload is a {type(state).__name__}, expected a dict")
    return state


def decode(data: bytes | memoryview, name: str = "<bytes>", map_location: Any = "cpu"
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(state, manifest)`` from a whole file's bytes: this format or a plain torch.save zip."""
    data = memoryview(data)
    if _sniff(bytes(data[:len(MAGIC)]), len(data), name) == "zip":
        state = _torch_load(data, name, map_location)
        return state, _zip_manifest(len(data))
    manifest, offset = _parse_head(data, name, len(data))
    payload = data[offset:]
    digest = f"xxh3_64:{xxhash.xxh3_64_intdigest(payload):016x}"
    if digest != manifest["checksum"]:
        raise CheckpointError(f"{name}: corrupt checkpoint (payload checksum mismatch)")
    if manifest["compression"] == "lz4.frame":
        try:
            dec = lz4.frame.LZ4FrameDecompressor()
            raw = dec.decompress(payload, max_length=int(manifest["raw_bytes"]) + 1)
            complete = dec.eof
        except RuntimeError as err:
            raise CheckpointError(f"{name}: corrupt LZ4 payload ({one_line(err)})") from None
        if not complete or len(raw) != manifest["raw_bytes"]:
            raise CheckpointError(f"{name}: corrupt LZ4 payload (size {len(raw)}, manifest {manifest['raw_bytes']})")
    elif manifest["compression"] == "none":
        raw = payload
    else:
        raise CheckpointError(f"{name}: unknown compression {manifest['compression']!r}")
    return _torch_load(raw, name, map_location), manifest


# -- RNG helpers (weights_only-safe representation) --------------------------------------------
def capture_rng_state() -> dict[str, Any]:
    """torch CPU (+ CUDA), Python ``random`` and NumPy global RNG states as tensors / plain values."""
    import numpy as np

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    out: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype("int64")), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
    }
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def restore_rng_state(rng: dict[str, Any]) -> None:
    import numpy as np

    torch.set_rng_state(rng["torch"])
    py = rng["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = rng["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype("uint32"), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


# -- reading one file --------------------------------------------------------------------------------
def _read_all(fs: pafs.FileSystem, path: str, name: str) -> bytes:
    try:
        with fs.open_input_file(path) as f:
            return f.read()
    except FileNotFoundError:
        raise CheckpointError(f"{name}: no such checkpoint") from None
    except OSError as err:
        raise CheckpointError(f"{name}: cannot read ({one_line(err)})") from None


def _read_manifest(fs: pafs.FileSystem, path: str, name: str) -> dict[str, Any]:
    try:
        with fs.open_input_file(path) as f:
            size = f.size()
            head = f.read(min(size, 4096))
            if _sniff(head[:len(MAGIC)], size, name) == "zip":
                return _zip_manifest(size)
            parsed = _parse_head(head, name, size)
            if parsed is None:  # manifest longer than the first read
                _, _, mlen, _ = _PREFIX.unpack_from(head)
                parsed = _parse_head(head + f.read(_PREFIX.size + mlen - len(head)), name, size)
            return parsed[0]
    except FileNotFoundError:
        raise CheckpointError(f"{name}: no such checkpoint") from None
    except OSError as err:
        raise CheckpointError(f"{name}: cannot read ({one_line(err)})") from None


def load_checkpoint(path_or_uri: str, map_location: Any = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    """Load one file (this format or a plain torch.save zip) from a path or URI, no store needed."""
    fs, path = resolve(path_or_uri)
    return decode(_read_all(fs, path, path_or_uri), path_or_uri, map_location)


def read_manifest(path_or_uri: str) -> dict[str, Any]:
    fs, path = resolve(path_or_uri)
    return _read_manifest(fs, path, path_or_uri)

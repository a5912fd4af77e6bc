"""The records a run keeps: its errors, JSON written atomically, config fingerprints and the
digests that ``progress.json`` and ``results.json`` carry (``experiments.harness`` holds
the rest; ``experiments._workdir`` the run directory that uses these)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import shlex
import sys
from typing import Any, Mapping

import jax
import numpy as np

from experiments import _processes
from jhash import files


class ConfigError(ValueError):
  """A config names something that does not exist, or a setting out of range."""


class WorkdirError(RuntimeError):
  """The workdir is in use by another run, holds a run of another config, or a checkpoint
  that does not fit this version's state."""


def jsonable(x: Any) -> Any:
  """``x`` with arrays as lists, NumPy scalars as Python numbers, inf/NaN as strings/None."""
  if hasattr(x, "to_dict"):  # ml_collections.ConfigDict
    x = x.to_dict()
  if isinstance(x, Mapping):
    return {str(k): jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [jsonable(v) for v in x]
  if isinstance(x, (np.ndarray, jax.Array)):
    return jsonable(np.asarray(x).tolist())
  if isinstance(x, np.generic):
    return jsonable(x.item())
  if isinstance(x, float) and not np.isfinite(x):
    return None if np.isnan(x) else ("inf" if x > 0 else "-inf")
  return x


def atomic_write_bytes(path, data: bytes) -> None:
  """``jhash.files.atomic_write_bytes`` in the process that writes the run's files (the
  only one, or process 0 of several); nothing in the others."""
  if _processes.writes():
    files.atomic_write_bytes(path, data)


def atomic_write_json(path, obj: Any) -> None:
  atomic_write_bytes(path, json.dumps(jsonable(obj), indent=2, sort_keys=True).encode())


def read_json(path, default: Any = None, remedy: str | None = None) -> Any:
  """The JSON in ``path`` (``default`` when absent); a damaged file is a WorkdirError
  naming it and saying how to go on (``remedy``; files are written atomically, so damage
  comes from outside the run)."""
  path = pathlib.Path(path)
  if not path.exists():
    return default
  try:
    return json.loads(path.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as error:
    raise WorkdirError(
      f"{path} is damaged ({error}); jhash writes it atomically, so something else changed "
      f"it. {remedy or 'Restore it from a copy, or delete the folder it is in to start again.'}"
    ) from None


def first_line(error: BaseException, limit: int = 300) -> str:
  """The first line of an error's message (at most ``limit`` characters)."""
  text = str(error).strip().splitlines()
  line = text[0] if text else ""
  line = line.split(" See full TensorStore details")[0]  # a repr of a bound method follows
  return line[:limit]


def package_versions() -> dict[str, str]:
  names = (
    "jhash",
    "jax",
    "jaxlib",
    "numpy",
    "optax",
    "flax",
    "chex",
    "scipy",
    "ml_collections",
    "orbax-checkpoint",
    "tensorboardX",
  )
  out = {}
  for name in names:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
      out[name] = importlib.metadata.version(name)
  out["python"] = platform.python_version()
  out["backend"] = jax.default_backend()
  out["devices"] = str(jax.devices())
  return out


def machine() -> dict[str, Any]:
  """What ran it: the CPU model, the cores this process may use, the OS, the devices."""
  model = platform.processor() or platform.machine()
  with contextlib.suppress(OSError):
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"):
        model = line.split(":", 1)[1].strip()
        break
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  devices = jax.devices()
  return {
    "cpu": model,
    "cores": cores,
    "system": f"{platform.system()} {platform.machine()}",
    "accelerator": None if devices[0].platform == "cpu" else devices[0].device_kind,
    "num_devices": len(devices),
  }


def command() -> str | None:
  """``python -m experiments.main ...`` as this process was run; None when the trainer
  was called some other way (from a test, a notebook)."""
  argv = list(sys.argv)
  if not argv or pathlib.Path(argv[0]).parts[-2:] != ("experiments", "main.py"):
    return None
  return " ".join(["python", "-m", "experiments.main"] + [shlex.quote(a) for a in argv[1:]])


def config_fingerprint(config) -> str:
  """Short hash of a config; a workdir refuses to run a config of another fingerprint."""
  blob = json.dumps(jsonable(config), sort_keys=True).encode()
  return hashlib.sha256(blob).hexdigest()[:16]


def _flat(tree, prefix=""):
  if isinstance(tree, Mapping):
    return {k: v for key, value in tree.items() for k, v in _flat(value, f"{prefix}{key}.").items()}
  return {prefix[:-1]: tree}


def config_differences(old, new) -> list[str]:
  """``key: old -> new`` for each (dotted) key whose value differs."""
  a, b = _flat(jsonable(old)), _flat(jsonable(new))
  return [
    f"{k}: {a.get(k, '(absent)')!r} -> {b.get(k, '(absent)')!r}"
    for k in sorted(set(a) | set(b))
    if a.get(k, "(absent)") != b.get(k, "(absent)")
  ]


def stable_hash(part: str) -> int:
  """A uint32 of ``part`` that is the same in every process (unlike Python's ``hash``)."""
  return int.from_bytes(hashlib.sha256(str(part).encode()).digest()[:4], "little")


#: ``progress.json``'s layout: 2 held a SHA-256 digest of each finished cell's result, 3
#: also one of the wall times (``time_digest``), 4 binds each digest to its cell's name
#: (``cell_digest``: two cells' entries swapped are damage), 5 also to the config's
#: fingerprint (a result copied from another config's run is damage). Other versions are
#: refused (their results or wall times cannot be checked).
PROGRESS_VERSION = 5


def _is_seconds(value) -> bool:
  return (
    isinstance(value, (int, float))
    and not isinstance(value, bool)
    and math.isfinite(value)
    and value >= 0
  )


def cell_digest(cell: str, result: Any, fingerprint: str) -> str:
  """The digest ``progress.json`` keeps of a finished cell: its name, its result and the
  fingerprint of the config that made it (a result copied from another run is damage)."""
  return result_digest({"cell": cell, "fingerprint": fingerprint, "result": result})


def times_digest(progress: Mapping) -> str:
  """The SHA-256 of a ``progress.json``'s wall times: each cell's ``seconds`` and the
  ``wall_time_s`` the results last published."""
  return result_digest({"seconds": progress["seconds"], "wall_time_s": progress.get("wall_time_s")})


def result_digest(result: Any) -> str:
  """The SHA-256 of a cell's result as ``progress.json`` holds it (keys sorted)."""
  text = json.dumps(result, sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode()).hexdigest()


_EDITED = (
  "differs from the digest jhash wrote with it (a value, a curve or a history was changed or "
  "lost, or the entry is another run's: the digest covers the config too)"
)


def with_digest(results: Mapping) -> dict:
  """``results`` as ``results.json`` holds them: JSON values, and ``"digest"``, the
  SHA-256 of the rest (``result_digest``)."""
  results = jsonable({k: v for k, v in results.items() if k != "digest"})
  return {**results, "digest": result_digest(results)}

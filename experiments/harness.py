"""What every experiment shares: configs, atomic files, resumable checkpoints, results.

An experiment's ``train_and_evaluate(config, workdir)`` runs a grid of *cells*
(dataset x method x code length, say). Each finished cell's metrics are
recorded in ``workdir/progress.json``; a cell in progress saves its method
state every ``checkpoint_every`` steps in ``workdir/checkpoints/``. Every file
is written to a temporary name and renamed into place, so a run killed at any
moment leaves either the old or the new file, never a torn one. A rerun with the
same config skips finished cells, resumes the cell in progress from its last
checkpoint and, since step keys are ``fold_in(key, step)``, ends with the same
results as a run never interrupted.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import tempfile
import time
from typing import Any, Callable

import jax
import numpy as np

# Set to a number to kill the process (SIGKILL) right after that many checkpoint
# saves: the fault injection behind the resume test.
CRASH_ENV = "JHASH_KILL_AFTER_SAVES"


class ConfigDict(dict):
  """A dict with attribute access (``config.seed``), JSON-serialisable."""

  def __getattr__(self, name):
    try:
      value = self[name]
    except KeyError as e:
      raise AttributeError(name) from e
    return ConfigDict(value) if isinstance(value, dict) and not isinstance(value, ConfigDict) else value

  def __setattr__(self, name, value):
    self[name] = value


def atomic_write_bytes(path: pathlib.Path, data: bytes) -> None:
  """Write ``data`` to ``path`` through a temporary file and ``os.replace``."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(tmp)
    raise


def _jsonable(x: Any) -> Any:
  if isinstance(x, dict):
    return {str(k): _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_jsonable(v) for v in x]
  if isinstance(x, (np.ndarray, jax.Array)):
    return _jsonable(np.asarray(x).tolist())
  if isinstance(x, np.generic):
    return x.item()
  if isinstance(x, float) and not np.isfinite(x):
    return None if np.isnan(x) else ("inf" if x > 0 else "-inf")
  return x


def atomic_write_json(path: pathlib.Path, obj: Any) -> None:
  atomic_write_bytes(path, json.dumps(_jsonable(obj), indent=2, sort_keys=True).encode())


def read_json(path: pathlib.Path, default: Any = None) -> Any:
  path = pathlib.Path(path)
  if not path.exists():
    return default
  return json.loads(path.read_text())


def package_versions() -> dict[str, str]:
  names = ("jhash", "jax", "jaxlib", "numpy", "optax", "flax", "chex", "scipy")
  out = {}
  for name in names:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
      out[name] = importlib.metadata.version(name)
  out["python"] = platform.python_version()
  out["backend"] = jax.default_backend()
  out["devices"] = str(jax.devices())
  return out


def config_fingerprint(config: dict) -> str:
  """Short hash of a config; a workdir refuses to resume under a different config."""
  blob = json.dumps(_jsonable(config), sort_keys=True).encode()
  return hashlib.sha256(blob).hexdigest()[:16]


class Checkpointer:
  """Per-cell results and mid-cell method states of one run directory."""

  def __init__(self, workdir: str | os.PathLike, config: dict):
    self.workdir = pathlib.Path(workdir)
    self.workdir.mkdir(parents=True, exist_ok=True)
    self.progress_path = self.workdir / "progress.json"
    fingerprint = config_fingerprint(config)
    progress = read_json(self.progress_path, {"fingerprint": fingerprint, "cells": {}})
    if progress["fingerprint"] != fingerprint:
      raise ValueError(f"workdir {self.workdir} holds a run of a different config "
                       f"(fingerprint {progress['fingerprint']}, this config {fingerprint}); "
                       "use a fresh workdir.")
    self.progress = progress
    self._saves = 0

  # --- finished cells -------------------------------------------------------
  def done(self, cell: str) -> dict | None:
    return self.progress["cells"].get(cell)

  def finish(self, cell: str, result: dict) -> None:
    self.progress["cells"][cell] = _jsonable(result)
    atomic_write_json(self.progress_path, self.progress)
    with contextlib.suppress(FileNotFoundError):
      os.unlink(self._state_path(cell))
    self._after_save()

  # --- states inside a cell -------------------------------------------------
  def _state_path(self, cell: str) -> pathlib.Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cell)
    return self.workdir / "checkpoints" / f"{safe}.npz"

  def save_state(self, cell: str, step: int, state: Any, history: dict) -> None:
    """Save a method state (any pytree of arrays) and its metric history at ``step``."""
    leaves = jax.tree.leaves(state)
    arrays = {f"leaf_{i}": np.asarray(x) for i, x in enumerate(leaves)}
    arrays.update({f"history_{k}": np.asarray(v) for k, v in history.items()})
    arrays["step"] = np.asarray(step)
    path = self._state_path(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
      np.savez(f, **arrays)
      tmp = f.name
    os.replace(tmp, path)
    self._after_save()

  def load_state(self, cell: str, template: Any):
    """(step, state, history) saved for ``cell``, or None. ``template``: a pytree of
    the state's structure (e.g. ``jax.eval_shape(method.init, key, batch)``)."""
    path = self._state_path(cell)
    if not path.exists():
      return None
    with np.load(path, allow_pickle=False) as data:
      leaves, treedef = jax.tree.flatten(template)
      loaded = [data[f"leaf_{i}"] for i in range(len(leaves))]
      history = {k[len("history_"):]: data[k] for k in data.files if k.startswith("history_")}
      step = int(data["step"])
    return step, jax.tree.unflatten(treedef, loaded), history

  def remove_state(self, cell: str) -> None:
    """Delete the saved state of ``cell`` (if any), e.g. once later cells no longer
    need it; ``done`` results are kept."""
    self._state_path(cell).unlink(missing_ok=True)

  def _after_save(self) -> None:
    self._saves += 1
    limit = os.environ.get(CRASH_ENV)
    if limit is not None and self._saves >= int(limit):
      os.kill(os.getpid(), 9)


def fit_resumable(ckpt: Checkpointer, cell: str, method, key, batch, num_steps: int | None,
                  checkpoint_every: int, progress: bool = True):
  """``jhash.fit`` that checkpoints every ``checkpoint_every`` steps and resumes."""
  import jhash  # local: keeps this module importable without initialising jhash

  total = method.num_steps if num_steps is None else num_steps
  start, state, history = 0, None, {}
  template = jax.eval_shape(lambda k: jhash.init(method, k, batch), key)
  saved = ckpt.load_state(cell, template)
  if saved is not None:
    start, state, history = saved
    state = jax.tree.map(jax.numpy.asarray, state)
  collected = {k: [np.asarray(v)] for k, v in history.items()}

  def on_step(step, st, metrics):
    for name, value in metrics.items():
      collected.setdefault(name, []).append(np.asarray(value))
    if checkpoint_every and step % checkpoint_every == 0 and step < total:
      ckpt.save_state(cell, step, st, {k: np.concatenate(v) for k, v in collected.items()})

  state, _ = jhash.fit(method, key, batch, total, state=state, start_step=start,
                       progress=progress, on_step=on_step)
  return state, {k: np.concatenate(v) for k, v in collected.items()}


def write_results(workdir, config: dict, metrics: dict, started: float,
                  extra: dict | None = None) -> dict:
  """Write ``results.json``: metrics, config, seed, package versions, wall time."""
  results = {
      "metrics": metrics,
      "config": dict(config),
      "seed": config.get("seed"),
      "versions": package_versions(),
      "wall_time_s": time.time() - started,
      "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
  }
  if extra:
    results.update(extra)
  atomic_write_json(pathlib.Path(workdir) / "results.json", results)
  return results


def format_table(rows: list[list[Any]], header: list[str]) -> str:
  """A GitHub-markdown table."""
  cells = [[str(h) for h in header]] + [[f"{v:.4f}" if isinstance(v, float) else str(v)
                                         for v in row] for row in rows]
  widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
  line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
  sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
  return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def run_cells(cells: list[tuple[str, Callable[[], dict]]], ckpt: Checkpointer,
              progress: bool = True) -> dict:
  """Run named cells in order, skipping finished ones; returns cell -> result."""
  out = {}
  todo = [(name, fn) for name, fn in cells if ckpt.done(name) is None]
  if progress and todo:
    print(f"{len(cells) - len(todo)} of {len(cells)} cells already done; running {len(todo)}.",
          flush=True)
  for name, fn in cells:
    result = ckpt.done(name)
    if result is None:
      t0 = time.time()
      result = fn()
      result["seconds"] = time.time() - t0
      ckpt.finish(name, result)
      if progress:
        print(f"  {name}: " + ", ".join(f"{k}={v:.4f}" for k, v in result.items()
                                         if isinstance(v, float)), flush=True)
    out[name] = result
  return out


def cell_key(key, *indices):
  """The key of a cell: ``key`` folded with each index in turn (stable across runs)."""
  for i in indices:
    key = jax.random.fold_in(key, i)
  return key

"""Keep a trained state: ``jhash.save`` and ``jhash.restore``, on orbax.

A saved state is a folder: orbax's checkpoint of the state's arrays, ``jhash_state.json``
(the method's name and bit length, and each array's path, shape and dtype) and the list
of its files with their SHA-256 (``jhash.files``). ``restore`` rebuilds the state's
exact type from the method and a batch shaped like the training batch (the template is
``jax.eval_shape`` of ``jhash.init``: nothing is computed), so ``encode`` and ``fit`` take
it as they take the original. Nothing is unpickled: arrays and JSON only.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import secrets
from typing import Any

import jax
import numpy as np

from jhash import _api
from jhash import _checks
from jhash import files
from jhash import _fit

INFO = "jhash_state.json"
_FORMAT = "jhash-state/1"


def _layout(tree) -> list[list]:
  """[path, shape, dtype] of each array of ``tree``, in order."""
  return [
    [jax.tree_util.keystr(path), list(np.shape(x)), np.dtype(x.dtype).name]
    for path, x in jax.tree_util.tree_leaves_with_path(tree)
  ]


def _record(state) -> tuple[str | None, int | None]:
  """(method name, bit length) from the state's ``Trained`` record, when it has one."""
  record = getattr(state, "trained", None)
  if not isinstance(record, _api.Trained):
    return None, None
  name = bytes(np.asarray(record.name, np.uint8)).rstrip(b"\0").decode(errors="replace")
  return name, int(record.num_bits)


def save(path, state: Any, *, overwrite: bool = False) -> pathlib.Path:
  """Save a trained state (any pytree of arrays from ``jhash.fit``, ``jhash.init`` or a
  ``make_train`` function) to the folder ``path``.

  The folder appears whole or not at all: it is written beside ``path`` and renamed into
  place (with ``overwrite=True`` the old folder is replaced only once the new one is
  complete). Only a folder jhash.save wrote is replaced, and only while it holds nothing
  else: files added to it (notes, a state saved inside it) are named in a
  ``FileExistsError``, and nothing is deleted. A state is not saved inside another.

  Over several processes (``jhash.distributed``) every process calls it with the same
  ``path`` on a file system they share: a state split over processes is gathered, process 0
  writes the folder, and every process returns once it is written (or raises its error).

  Args:
    path: the folder to create.
    state: the state; its arrays are fetched to the host.
    overwrite: replace an existing folder (default: an existing ``path`` is an error).
  Returns:
    ``path`` as a ``pathlib.Path``.

  Example:
    >>> import jax, numpy as np, jhash, tempfile, pathlib
    >>> batch = {"views": (np.random.default_rng(0).normal(size=(50, 8)).astype("f4"),)}
    >>> method = jhash.methods.itq(4, num_iters=3)
    >>> state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> path = jhash.save(pathlib.Path(tempfile.mkdtemp()) / "itq", state)
    >>> again = jhash.restore(path, method, batch)
    >>> bool((jhash.encode(method, again, batch) == jhash.encode(method, state, batch)).all())
    True
  """
  path = _as_path(path)
  if path.exists() and not path.is_dir():
    raise FileExistsError(f"path {path} is a file; jhash.save writes a folder.")
  if path.exists() and not (path / INFO).is_file():
    raise FileExistsError(
      f"path {path} exists and is not a state jhash.save wrote (it has no {INFO}); "
      "jhash.save replaces only its own folders: choose a new path."
    )
  overwrite = _checks.flag(overwrite, "overwrite")
  if path.exists() and not overwrite:
    raise FileExistsError(f"path {path} holds a saved state; pass overwrite=True to replace it.")
  _check_not_inside_state(path)
  if path.exists():
    _check_only_ours(path)
  _check_savable(state)
  host = _host_state(state)  # over processes: a collective, so before any write
  if jax.process_count() == 1:
    return _write(path, host, _record(state))
  # Several processes: process 0 writes, the others wait for it and hear whether it did.
  error = None
  if jax.process_index() == 0:
    try:
      _write(path, host, _record(state))
    except Exception as e:  # passed on after the others are told, so that none waits
      error = e
  from jax.experimental import multihost_utils

  written = multihost_utils.broadcast_one_to_all(np.int32(error is None))
  if error is not None:
    raise error
  if not int(written):
    raise OSError(f"jhash.save: process 0 could not write {path} (its error says why).")
  return path


def _host_state(state):
  """The state's arrays on the host; a global array of several processes gathered (every
  process then holds the whole state)."""
  from jhash import distributed

  def fetch(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      return distributed.gather(x)
    return jax.device_get(x)

  return jax.tree.map(fetch, state)


def _checkpointer():
  """orbax's checkpointer for this process alone: ``save`` writes from process 0 and
  ``restore`` reads on every process, with no barrier between processes."""
  import orbax.checkpoint as ocp

  me = jax.process_index()
  only_me = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
  return ocp.StandardCheckpointer(multiprocessing_options=only_me)


def _write(path: pathlib.Path, host_state, record) -> pathlib.Path:
  """Write the host state to ``path`` through a partial folder renamed into place."""
  name, num_bits = record
  _make_parent(path)
  partial = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
  try:  # made here, so a folder that cannot be written is named before orbax starts
    partial.mkdir()
  except OSError as error:
    raise type(error)(f"path {path} cannot be written: {error.strerror or error}.") from None
  try:
    with _checkpointer() as checkpointer:
      checkpointer.save(partial / "state", host_state)
    info = {
      "format": _FORMAT,
      "method": name,
      "num_bits": num_bits,
      "state_type": type(host_state).__name__,
      "arrays": _layout(host_state),
    }
    files.atomic_write_bytes(partial / INFO, json.dumps(info, indent=2).encode())
    files.write_manifest(partial)
    if path.exists():
      _check_only_ours(path)  # again: files may have been added while this one was written
      old = partial.with_suffix(".old")
      os.replace(path, old)
      os.replace(partial, path)
      shutil.rmtree(old, ignore_errors=True)
    else:
      os.replace(partial, path)
  finally:
    shutil.rmtree(partial, ignore_errors=True)
  return path


def _written_by_save(path: pathlib.Path) -> tuple[set[str], set[str]]:
  """The files (relative paths) jhash.save wrote in the saved state at ``path``, and the
  folders holding them: those its ``MANIFEST`` lists. Without a readable list, what save
  writes at the top (``INFO``, the list, orbax's ``state`` folder, taken whole)."""
  try:
    entries = json.loads((path / files.MANIFEST).read_text())["files"]
  except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
    entries = None
  if not isinstance(entries, dict):
    return {INFO, files.MANIFEST, "state/"}, set()
  names = set(entries)
  folders = {parent.as_posix() for name in names for parent in pathlib.PurePosixPath(name).parents}
  return names | {files.MANIFEST}, folders - {"."}


def _foreign_files(path: pathlib.Path) -> list[str]:
  """What under ``path`` jhash.save did not write, as relative paths: files and links,
  and folders holding none of its files but some others (named once, as ``name/``)."""
  ours, folders = _written_by_save(path)
  found = []
  for root, dirs, names in os.walk(path):
    here = pathlib.Path(root).relative_to(path)
    entries = [(d, True) for d in dirs] + [(n, False) for n in names]
    dirs[:] = []
    for name, is_dir in sorted(entries):
      relative = (here / name).as_posix()
      full = pathlib.Path(root) / name
      if is_dir and relative in folders and not full.is_symlink():
        dirs.append(name)  # a folder of its own files: look inside
      elif is_dir and not full.is_symlink() and not _holds_files(full):
        continue  # an empty folder: nothing to lose
      elif (relative + "/" if is_dir else relative) not in ours:
        found.append(relative + "/" if is_dir else relative)
  return found


def _holds_files(folder: pathlib.Path) -> bool:
  return any(not p.is_dir() or p.is_symlink() for p in folder.rglob("*"))


def _check_only_ours(path: pathlib.Path) -> None:
  """``overwrite=True`` replaces a saved state only when it holds nothing else."""
  foreign = _foreign_files(path)
  if foreign:
    shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    raise FileExistsError(
      f"path {path} holds {len(foreign)} {'entry' if len(foreign) == 1 else 'entries'} "
      f"jhash.save did not write: {shown}. "
      "overwrite=True would delete them with the old state: move them out of the folder "
      "first, or save to a new path."
    )


def _check_not_inside_state(path: pathlib.Path) -> None:
  """A state saved inside another's folder would be deleted by the outer one's overwrite."""
  for ancestor in path.parents:
    if (ancestor / INFO).is_file() and (ancestor / files.MANIFEST).is_file():
      raise FileExistsError(
        f"path {path} lies inside the saved state {ancestor}; jhash.save does not save a "
        "state inside another's folder: choose a path outside it."
      )


def _as_path(path) -> pathlib.Path:
  """``path`` (a str or os.PathLike naming a folder) as an absolute Path."""
  if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
    raise TypeError(f"path must name a folder (a str or pathlib.Path); got {path!r}.")
  return pathlib.Path(path).absolute()


def _check_savable(state) -> None:
  """A pytree of concrete arrays of plain dtypes (no tracers, no typed PRNG keys)."""
  leaves = jax.tree_util.tree_leaves_with_path(state)
  if not leaves or not all(hasattr(x, "dtype") and hasattr(x, "shape") for _, x in leaves):
    raise TypeError(
      f"state must be a pytree of arrays (a state from jhash.fit, jhash.init or make_train); "
      f"got {type(state).__name__} with leaves {[type(x).__name__ for _, x in leaves[:3]]}."
    )
  for where, x in leaves:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
      raise ValueError(
        f"state holds a typed PRNG key at {jax.tree_util.keystr(where)}, which jhash.save "
        "does not store; keep jax.random.key_data(key) in the state instead."
      )
    if getattr(x.dtype, "kind", None) == "O":
      raise ValueError(
        f"state holds an object array at {jax.tree_util.keystr(where)}; jhash.save stores "
        "arrays of numbers only."
      )
    if isinstance(x, jax.core.Tracer):
      raise TypeError(
        "jhash.save writes files on the host, so it cannot run inside jit or vmap; save "
        "the state the compiled function returns."
      )


def _make_parent(path: pathlib.Path) -> None:
  """Create ``path``'s parent folders, or name the file in the way."""
  for ancestor in reversed(path.parents):
    if ancestor.exists() and not ancestor.is_dir():
      raise FileExistsError(f"path {path} cannot be created: {ancestor} is a file, not a folder.")
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
  except OSError as error:
    raise type(error)(f"path {path} cannot be created: {error.strerror or error}.") from None


def _read_info(path: pathlib.Path) -> dict:
  file = path / INFO
  if not path.is_dir():
    raise FileNotFoundError(f"path {path} is not a folder written by jhash.save.")
  if not file.is_file():
    raise ValueError(f"path {path} is not a state written by jhash.save: it has no {INFO}.")
  if not (path / files.MANIFEST).is_file():  # save writes it last: its absence is damage
    raise ValueError(
      f"the saved state {path} is damaged: {path / files.MANIFEST} (the list of its files, "
      "written last by jhash.save) is missing."
    )
  _check_manifest(path / files.MANIFEST)
  damage = files.first_damage(path)
  if damage is not None:
    raise ValueError(f"the saved state {path} is damaged: {damage}.")
  try:
    info = json.loads(file.read_text())
  except (ValueError, UnicodeDecodeError) as error:
    raise ValueError(f"{file} cannot be read ({error}).") from None
  if not isinstance(info, dict):
    raise ValueError(f"{file} is damaged: it holds a {type(info).__name__}, not an object.")
  if info.get("format") != _FORMAT:
    raise ValueError(f"{file} is of format {info.get('format')!r}; this jhash reads {_FORMAT!r}.")
  _check_info(file, info)
  return info


def _check_manifest(file: pathlib.Path) -> None:
  """Refuse a list of files (``files.MANIFEST``) that parses but is not the object
  ``files.write_manifest`` writes: ``{"files": {name: [size, sha256], ...}}``."""
  try:
    manifest = json.loads(file.read_text())
  except (ValueError, UnicodeDecodeError):
    return  # files.first_damage names an unreadable list
  entries = manifest.get("files") if isinstance(manifest, dict) else None
  if not isinstance(entries, dict):
    raise ValueError(
      f"the saved state {file.parent} is damaged: {file} (the list of its files) must be "
      f'an object {{"files": {{name: [size, sha256]}}}}; got {json.dumps(manifest)[:80]}.'
    )
  for name, entry in entries.items():
    if not (
      isinstance(entry, list)
      and len(entry) == 2
      and isinstance(entry[0], int)
      and not isinstance(entry[0], bool)
      and isinstance(entry[1], str)
    ):
      raise ValueError(
        f"the saved state {file.parent} is damaged: {file} (the list of its files) gives "
        f"{name!r} as {json.dumps(entry)[:60]}, not [size, sha256]."
      )


def _check_info(file: pathlib.Path, info: dict) -> None:
  """Refuse a ``jhash_state.json`` of the right format whose fields are missing or of
  the wrong types (a hand-edited file)."""
  problems = []
  if "method" not in info or not isinstance(info["method"], (str, type(None))):
    problems.append("'method' must be a method name or null")
  bits = info.get("num_bits", "absent")
  if not (bits is None or (isinstance(bits, int) and not isinstance(bits, bool))):
    problems.append("'num_bits' must be an int or null")
  arrays = info.get("arrays")
  if not isinstance(arrays, list) or not all(
    isinstance(a, list) and len(a) == 3 and isinstance(a[0], str) for a in arrays
  ):
    problems.append("'arrays' must be a list of [path, shape, dtype]")
  if problems:
    raise ValueError(f"{file} is damaged: {'; '.join(problems)}.")


def restore(path, method: _api.HashingMethod, batch) -> Any:
  """The state saved at ``path``, as the state type ``method`` makes for ``batch``.

  Args:
    path: a folder written by ``jhash.save``.
    method: the method that trained the state, built with the same settings.
    batch: a batch laid out as the training batch (the same views, item shapes and
      dtypes; the same item count for methods whose state holds a code per training item,
      as CDH's and HBMP's do). Only shapes are read.
  Returns:
    The state: ``encode``, ``fit(state=...)`` and ``make_train`` take it as the original.
    Over several processes each process reads it alone (no collective), as arrays on
    its own devices.
  Raises:
    ValueError: the folder is damaged (the damaged file is named where it can be told),
      or holds a state of another method or bit length, or of other settings (an array of
      another shape, dtype or name; the first is named).
  """

  _fit.check_method(method)
  path = _as_path(path)
  info = _read_info(path)
  if info["method"] is not None and (info["method"], info["num_bits"]) != (
    method.name,
    method.num_bits,
  ):
    raise ValueError(
      f"the state saved at {path} was trained by {info['method']} ({info['num_bits']} "
      f"bits); the method given is {method.name} ({method.num_bits} bits)."
    )
  template = jax.eval_shape(lambda k: _fit.init(method, k, batch), jax.random.key(0))
  want = _layout(template)
  if info["arrays"] != want:
    saved = {tuple(a[:1]): a for a in info["arrays"]}
    made = {tuple(a[:1]): a for a in want}
    first = next((p for p in list(made) + list(saved) if saved.get(p) != made.get(p)), ("(order)",))
    raise ValueError(
      f"the state saved at {path} does not fit {method.name}'s state for this batch "
      f"(other settings or another training set): array {first[0]} is "
      f"{_describe(saved.get(first))} in the saved state and {_describe(made.get(first))} "
      f"in {method.name}'s. Build the method with the settings it was trained with, and "
      f"pass a batch laid out as the training batch."
    )
  try:
    with _checkpointer() as checkpointer:
      return checkpointer.restore(path / "state", template)
  except Exception as error:  # orbax / TensorStore / JSON: a file it cannot read
    raise ValueError(_unreadable(path, error)) from None


def _unreadable(path: pathlib.Path, error: Exception) -> str:
  """The message for a saved state whose arrays orbax cannot restore, naming the file when
  it can be told (the list of files matched it: it was damaged before the list was
  rewritten, or written by another version)."""
  file = _damaged_file(path / "state", error)
  what = f"{file} cannot be read" if file else "its arrays cannot be restored"
  first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
  return (
    f"the saved state {path} is damaged or was written by another version of jhash: {what} "
    f"({type(error).__name__}: {first}). Save the state again, or restore an intact copy."
  )


def _damaged_file(folder: pathlib.Path, error: Exception) -> pathlib.Path | None:
  """The file ``error`` names (TensorStore's 'local file "..."'), or the first of orbax's
  JSON files in ``folder`` that does not parse; None when neither tells."""
  named = [pathlib.Path(m) for m in re.findall(r'local file "([^"]+)"', str(error))]
  for file in reversed(named):
    if file.is_file():
      return file
  for file in sorted(folder.glob("_*")):
    try:
      json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError, OSError):
      if file.is_file():
        return file
  return None


def _describe(entry) -> str:
  if entry is None:
    return "absent"
  return f"{entry[2]} {tuple(entry[1])}"

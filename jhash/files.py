"""Files written so that a reader sees all of them or none, and checked before they are read.

``atomic_write_bytes`` writes through a temporary file and ``os.replace``. A folder of
files written by another library (an orbax checkpoint) gets a list of its files with
their sizes and SHA-256 (``write_manifest``, written last and atomically); before a
restore, ``first_damage`` compares the folder with that list, so a file missing, of
another size or of other contents is named, rather than surfacing as an error from
TensorStore, or orbax's guess that the tree came from another version. A folder without
the list (written before the list existed) is not checked. Hashing reads the folder once
more: about 0.2 s for 100 MB on one core.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import secrets

__all__ = [
  "atomic_write_bytes",
  "write_manifest",
  "first_damage",
  "MANIFEST",
]

#: The file name of a folder's list of files, sizes and SHA-256 (``write_manifest``).
MANIFEST = "jhash_files.json"


def _digest(path: pathlib.Path) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def _files(folder: pathlib.Path) -> dict[str, list]:
  return {
    str(p.relative_to(folder)): [p.stat().st_size, _digest(p)]
    for p in sorted(folder.rglob("*"))
    if p.is_file() and p.name != MANIFEST
  }


def write_manifest(folder, **record) -> None:
  """Record the files of ``folder`` (a finished checkpoint) in its ``MANIFEST``, atomically,
  with ``record`` (JSON values: what the checkpoint is, e.g. ``cell=``) beside them."""
  folder = pathlib.Path(folder)
  data = json.dumps({**record, "files": _files(folder)}, indent=2, sort_keys=True).encode()
  atomic_write_bytes(folder / MANIFEST, data)


def manifest_record(folder) -> dict:
  """What ``write_manifest`` recorded beside the files of ``folder`` ({} when nothing, or
  when its ``MANIFEST`` is missing or unreadable)."""
  try:
    data = json.loads((pathlib.Path(folder) / MANIFEST).read_text())
  except (OSError, ValueError, UnicodeDecodeError):
    return {}
  return {k: v for k, v in data.items() if k != "files"} if isinstance(data, dict) else {}


def first_damage(folder) -> str | None:
  """What is wrong with the first damaged file of ``folder``, or None when every file
  is as written (or the folder has no list to check against)."""
  folder = pathlib.Path(folder)
  path = folder / MANIFEST
  if not path.exists():
    if folder.is_dir() and not any(folder.iterdir()):
      return f"{folder} is empty (its files were deleted)"
    return None
  if not path.is_file():
    return f"{path} (the list of its files) is not a file"
  try:
    expected = json.loads(path.read_text())["files"]
  except (ValueError, KeyError, TypeError, UnicodeDecodeError):
    return f"{path} (the list of its files) cannot be read"
  for name, (size, digest) in expected.items():
    file = folder / name
    if not file.is_file():
      return f"{file} is missing"
    if file.stat().st_size != size:
      return f"{file} has {file.stat().st_size} bytes where {MANIFEST} lists {size}"
    if _digest(file) != digest:
      return f"{file} has other contents than {MANIFEST} lists"
  return None


def atomic_write_bytes(path, data: bytes) -> None:
  """Write ``data`` to ``path`` through a temporary file and ``os.replace``.

  The file is created with mode 0666 less the process's umask (as ``open`` does;
  ``tempfile.mkstemp`` would give 0600 and hide results from the group).
  """
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    tmp.unlink(missing_ok=True)
    raise

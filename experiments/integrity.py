"""A checkpoint's list of files, to tell a damaged checkpoint from one of another version.

After orbax has written a step's folder, ``write_manifest`` records every file in it
with its size and SHA-256 (``jhash_files.json``, written atomically). Before a restore,
``first_damage`` compares the folder with that list: a file missing, of another size or
of other contents is named, so the error a user sees is "this file is damaged" rather
than an error from TensorStore, or orbax's guess that the tree came from another version.
A folder without the list (written before the list existed) is not checked.

Hashing reads the checkpoint once more: about 0.2 s for a 100 MB state on one core.
"""

from __future__ import annotations

import hashlib
import json
import pathlib

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


def write_manifest(folder, write_json) -> None:
  """Record the files of ``folder`` (a finished checkpoint step) with ``write_json``
  (an atomic ``(path, obj)`` writer)."""
  folder = pathlib.Path(folder)
  write_json(folder / MANIFEST, {"files": _files(folder)})


def first_damage(folder) -> str | None:
  """What is wrong with the first damaged file of ``folder``, or None when every file
  is as written (or the folder has no list to check against)."""
  folder = pathlib.Path(folder)
  path = folder / MANIFEST
  if not path.exists():
    return None
  try:
    expected = json.loads(path.read_text())["files"]
  except (ValueError, KeyError, TypeError, UnicodeDecodeError):
    return f"{path} (the list of its files) cannot be read"
  for name, (size, digest) in expected.items():
    file = folder / name
    if not file.is_file():
      return f"{file} is missing"
    if file.stat().st_size != size:
      return f"{file} has {file.stat().st_size} bytes where {size} were written"
    if _digest(file) != digest:
      return f"{file} has other contents than were written"
  return None

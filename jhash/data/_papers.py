"""The papers' data sets as the field evaluates them, read from a user's own copy on disk.

``PAPER_PRESETS`` holds, in one place, each set's layout, its split sizes, the K of its
mAP@K, its relevance rule and the peers they come from (the facts gathered in the
project's ``PROTOCOLS.md``). Nothing is downloaded and nothing is unpickled: CIFAR-10 is
read from its binary release (``read_cifar10_binary``, ``jhash.data._cifar10``), the
others from the toolboxes' list files ``train.txt`` / ``test.txt`` / ``database.txt``
(``load_paper_lists``; test = the queries). ``CROSS_VIEW_PRESETS`` are CDH's cross-view
sets, one ``.mat`` file each (``load_cross_modal_mat``: image and text features, the
file's own splits). ``PAPER_PROTOCOLS`` are their ``load_protocol`` entries: in-memory
batches, ``root=`` the copy's folder (a cross-view set: its file, or the folder holding it
under its conventional name).
"""

from __future__ import annotations

import os
import pathlib
import warnings
from typing import Callable, NamedTuple

import numpy as np

from jhash import _checks
from jhash.data import _errors
from jhash.data._cifar10 import CIFAR10_LAYOUT
from jhash.data._cifar10 import CIFAR10_SPLITS
from jhash.data._cifar10 import cifar10_split
from jhash.data._cifar10 import read_cifar10_binary
from jhash.data._layouts import ImageList
from jhash.data._layouts import check_image_files
from jhash.data._layouts import load_cross_modal_mat
from jhash.data._layouts import load_image_list
from jhash.data._paper_presets import CROSS_VIEW_PRESETS
from jhash.data._paper_presets import PAPER_PRESETS
from jhash.data._paper_presets import PaperPreset
from jhash.data._splits import _check_limit
from jhash.data._splits import _limit

LIST_FILES = {"train": "train.txt", "query": "test.txt", "database": "database.txt"}
LISTS_LAYOUT = (
  "train.txt, test.txt and database.txt, one image a line: a path relative to the root, "
  "then its 0/1 label row (the deep hashing toolboxes' lists)"
)
DEFAULT_IMAGE_SIZE = 224  # the papers' input side (resize 256, crop 224)


CROSS_VIEW_LAYOUT = (
  "a cross-modal hashing .mat file (v4 to v7.3) with I_tr, T_tr, L_tr (training), I_te, "
  "T_te, L_te (queries) and optionally I_db, T_db, L_db (database): image features, text "
  "features, labels"
)
_PRESETS = {**PAPER_PRESETS, **CROSS_VIEW_PRESETS}  # every paper protocol's preset


def _preset(name: str, layout: str) -> PaperPreset:
  names = [k for k, p in _PRESETS.items() if p.layout == layout]
  if name not in names:
    raise ValueError(f"name must be one of {', '.join(names)}; got {name!r}.")
  return _PRESETS[name]


def _layout_text(name: str) -> str:
  preset = _PRESETS[name]
  if preset.layout == "cross-view-mat":
    return f"{CROSS_VIEW_LAYOUT}; root is that file, or a folder holding it as {preset.file_name}"
  return CIFAR10_LAYOUT if preset.layout == "cifar-binary" else LISTS_LAYOUT


def missing_root(name: str) -> ValueError:
  """The error for paper protocol ``name`` called without ``root``: what to pass."""
  what = "file or folder" if _PRESETS[name].layout == "cross-view-mat" else "folder"
  return ValueError(
    f"protocol {name!r} needs root=..., the {what} of your own copy of the data set: "
    f"{_layout_text(name)}. jhash never downloads it."
  )


def _root(name: str, root) -> pathlib.Path:
  """``root`` as a folder, or an error naming the protocol and its layout."""
  if root is None:
    raise missing_root(name)
  if not isinstance(root, (str, os.PathLike)):
    raise ValueError(f"root must be a folder path; got {_checks.describe(root)}.")
  if not os.fspath(root).strip():  # "" would read the working directory
    raise ValueError(
      f"protocol {name!r}: root is empty; give the folder of your copy: {_layout_text(name)}."
    )
  if not pathlib.Path(root).is_dir():
    raise FileNotFoundError(
      f"protocol {name!r}: root {os.fspath(root)!r} is not a folder; expected {_layout_text(name)}."
    )
  return pathlib.Path(root)


# ----------------------------------------------------------------------------- list sets


class PaperLists(NamedTuple):
  """A list set's split: three ``ImageList`` (paths joined to the root, labels bool [n, C]).

  Attributes:
    train, query, database: from ``train.txt``, ``test.txt``, ``database.txt``.
    notes: a line for each size that differs from the preset's (users' lists vary), for
      queries the database also lists, and for queries with no label.
  """

  train: ImageList
  query: ImageList
  database: ImageList
  notes: tuple[str, ...]


def _size_notes(name: str, lists: dict[str, ImageList]) -> tuple[str, ...]:
  preset = PAPER_PRESETS[name]
  wanted = {"query": preset.num_query, "train": preset.num_train, "database": preset.num_database}
  return tuple(
    f"{name}: {LIST_FILES[part]} lists {len(lists[part].paths):,} images; the preset's "
    f"protocol has {want:,} ({preset.source})."
    for part, want in wanted.items()
    if want is not None and len(lists[part].paths) != want
  )


def _split_notes(name: str, lists: dict[str, ImageList]) -> tuple[str, ...]:
  """Lines for queries that the database also lists (each would find itself at distance
  0, lifting the mAP) and for queries with no label (no item is relevant to them)."""
  notes = []
  database = set(lists["database"].paths)
  shared = sum(p in database for p in lists["query"].paths)
  if shared:
    notes.append(
      f"{name}: {shared:,} of the {len(lists['query'].paths):,} queries ({LIST_FILES['query']}) "
      f"are also in {LIST_FILES['database']}; each finds itself at distance 0, which lifts "
      "the mAP. The protocols keep queries out of the database."
    )
  unlabelled = int((~lists["query"].labels.any(axis=1)).sum())
  if unlabelled:
    notes.append(
      f"{name}: {unlabelled:,} queries in {LIST_FILES['query']} have no label, so no "
      "database item is relevant to them (they count 0 in the mAP, or are left out)."
    )
  return tuple(notes)


def load_paper_lists(
  name: str, root: str | os.PathLike, *, check_files: bool = True, encoding: str = "utf-8"
) -> PaperLists:
  """The split of list set ``name`` from the list files under ``root`` (module docstring).

  Args:
    name: a ``PAPER_PRESETS`` name of layout "lists": "nuswide_21", "nuswide_81",
      "coco", "imagenet100", "mirflickr", "mirflickr_21", "voc2012".
    root: the folder holding ``train.txt``, ``test.txt``, ``database.txt``; the lists'
      image paths are relative to it.
    check_files: True to check that every listed image exists (one error for all
      missing); False not to.
    encoding: the list files' text encoding (as ``load_image_list``'s).
  Returns:
    ``PaperLists(train, query, database, notes)``. Missing list files, label widths
    that differ between the files or from the preset's (``num_labels``), and missing
    images raise one error each, naming them; sizes that differ from the preset's are
    allowed and described in ``notes``, as are queries the database also lists and
    queries with no label.
  """
  preset = _preset(name, "lists")
  check_files = _checks.flag(check_files, "check_files")
  root = _root(name, root)
  folders = [f for f in LIST_FILES.values() if (root / f).is_dir()]
  if folders:
    raise FileNotFoundError(
      f"{name}: {root / folders[0]} is a folder, not a list file; expected {LISTS_LAYOUT}."
    )
  missing = [f for f in LIST_FILES.values() if not (root / f).is_file()]
  if missing:
    raise FileNotFoundError(f"{name}: {root} lacks {', '.join(missing)}; expected {LISTS_LAYOUT}.")
  lists = {
    part: load_image_list(root / f, root=root, encoding=encoding) for part, f in LIST_FILES.items()
  }
  widths = {LIST_FILES[part]: lst.labels.shape[1] for part, lst in lists.items()}
  if len(set(widths.values())) > 1:
    shown = ", ".join(f"{f}: {w}" for f, w in widths.items())
    raise _errors.DataFormatError(
      f"{name}: the list files under {root} have different label widths ({shown}); "
      "they must label the same classes."
    )
  width = widths["train.txt"]
  if width not in preset.num_labels:
    expected = " or ".join(str(c) for c in preset.num_labels)
    raise _errors.DataFormatError(
      f"{name}: the lists under {root} have {width} label columns; {name} has {expected}. "
      "Is root the copy of this data set?"
    )
  if preset.relevance == "same_class":  # one class an image: one-hot rows
    for part, lst in lists.items():
      counts = lst.labels.sum(axis=1)
      if (counts != 1).any():
        i = int(np.flatnonzero(counts != 1)[0])
        raise _errors.DataFormatError(
          f"{name}: {root / LIST_FILES[part]}, image {i + 1} ({lst.paths[i]}), has "
          f"{int(counts[i])} labels set; {name} is single-label: each row one-hot."
        )
  if check_files:
    paths = list(dict.fromkeys(p for lst in lists.values() for p in lst.paths))
    check_image_files(paths, f"{name}'s lists under {root}")
  notes = _size_notes(name, lists) + _split_notes(name, lists)
  return PaperLists(lists["train"], lists["query"], lists["database"], notes)


# ----------------------------------------------------------------------------- protocols


def _cifar10_batches(name, seed, root, query_per_class, train_per_class, limit, records):
  """The (train, query, database) batches of a CIFAR-10 protocol (``_cifar10_protocol``)."""
  _check_limit(limit)
  images, labels = read_cifar10_binary(_root(name, root), records_per_file=records)
  absent = sorted(set(range(10)) - set(np.unique(labels).tolist()))
  if absent:  # e.g. files of zeros: every label 0
    raise _errors.DataFormatError(
      f"{name}: the batch files under {root} hold no image of class {absent[0]} (classes "
      f"absent: {absent}); CIFAR-10's binary release holds all 10. Are they its files?"
    )
  split = cifar10_split(labels, name, seed, query_per_class, train_per_class)
  database = _limit(split["database"], limit, seed)
  train = database if name == "cifar10-2" else split["train"]
  take = lambda idx: {"views": (images[idx],), "labels": labels[idx]}
  return take(train), take(split["query"]), take(database)


def _cifar10_protocol(name: str) -> Callable:
  q, t = CIFAR10_SPLITS[name]

  def protocol(
    seed: int,
    *,
    root: str | os.PathLike,
    query_per_class: int = q,
    train_per_class: int = t,
    database_limit: int | None = None,
    records_per_file: int | None = 10_000,
  ):
    return _cifar10_batches(
      name, seed, root, query_per_class, train_per_class, database_limit, records_per_file
    )

  protocol.__name__ = protocol.__qualname__ = name.replace("-", "_")
  limited = " (the training set too, as it is the database)" if name == "cifar10-2" else ""
  protocol.__doc__ = f"""CIFAR-10, ``{name}``: {PAPER_PRESETS[name].note}

  Args:
    seed: the split's seed (DeepHash-pytorch's draw is unseeded; this one is seeded).
    root: the copy's folder: {CIFAR10_LAYOUT}.
    query_per_class, train_per_class: per class ({q:,} and {t:,}, the protocol's).
    database_limit: None for the whole database, else a random subset{limited}.
    records_per_file: as ``read_cifar10_binary`` (10,000; None for a cut-down copy).
  Returns:
    (train, query, database) batches: uint8 images [n, 32, 32, 3], int32 labels.
  """
  return protocol


def load_paper_split(
  name: str,
  seed: int,
  *,
  root: str | os.PathLike,
  database_limit: int | None = None,
  encoding: str = "utf-8",
  check_files: bool = True,
) -> PaperLists:
  """The split of list set ``name`` as ``load_protocol`` uses it, as lists of files.

  ``load_paper_lists`` with ``database_limit`` applied as ``load_protocol(name, seed,
  root=..., database_limit=...)`` applies it (the same random subset for the same seed),
  for a set streamed from its files rather than decoded in memory
  (``jhash.training_pipeline``, ``jhash.encode_stream``).

  Args:
    name, root, encoding, check_files: as ``load_paper_lists``.
    seed: the seed of ``database_limit``'s subset (the split itself is the lists').
    database_limit: None for the whole database, else a random subset of that many (a
      limit at or above the database's size keeps all of it, as ``load_protocol``).
  Returns:
    ``PaperLists(train, query, database, notes)``, the database cut to its subset.
  """
  seed = _checks.seed(seed)
  _check_limit(database_limit)
  lists = load_paper_lists(name, root, check_files=check_files, encoding=encoding)
  keep = _limit(np.arange(len(lists.database.paths)), database_limit, seed)
  database = ImageList([lists.database.paths[i] for i in keep], lists.database.labels[keep])
  return lists._replace(database=database)


def _list_batches(name, seed, root, image_size, limit, encoding):
  """The (train, query, database) batches of a list set (``_list_protocol``)."""
  from jhash.data._stream import read_images  # here: PIL loads only when images are read

  side = _checks.positive_int(image_size, "image_size")
  lists = load_paper_split(name, seed, root=root, database_limit=limit, encoding=encoding)
  parts = (lists.train, lists.query, lists.database)
  sizes = dict(zip(("train", "query", "database"), (len(p.paths) for p in parts)))
  total = sum(sizes.values())
  _checks.fits_in_memory(
    {"the images": total * side * side * 3, "the labels": total * lists.train.labels.shape[1]},
    f"protocol {name!r} at image_size={side}: {total:,} images ({sizes['train']:,} training, "
    f"{sizes['query']:,} queries, {sizes['database']:,} database)",
    "lower image_size or database_limit, or stream the images from their files (in an "
    "experiment config: the data set's stream=True; in your own code: "
    f"jhash.training_pipeline over load_paper_split({name!r}, seed, root=...).train)",
  )
  if lists.notes:
    warnings.warn(" ".join(lists.notes), UserWarning, stacklevel=4)

  def take(images: ImageList) -> dict:
    pixels = read_images(images.paths, size=(side, side), dtype=np.uint8)
    return {"views": (pixels,), "labels": images.labels}

  return tuple(take(part) for part in parts)


def _list_protocol(name: str) -> Callable:
  preset = PAPER_PRESETS[name]

  def protocol(
    seed: int,
    *,
    root: str | os.PathLike,
    image_size: int = DEFAULT_IMAGE_SIZE,
    database_limit: int | None = None,
    encoding: str = "utf-8",
  ):
    return _list_batches(name, seed, root, image_size, database_limit, encoding)

  protocol.__name__ = protocol.__qualname__ = name
  protocol.__doc__ = f"""``{name}`` from its list files (``load_paper_lists``): {preset.note}

  Args:
    seed: the seed of ``database_limit``'s subset (the split is the lists').
    root: the copy's folder: {LISTS_LAYOUT}.
    image_size: the side every image is resized to (224, the papers').
    database_limit: None for the whole database, else a random subset.
    encoding: the list files' text encoding ("utf-8"; "latin-1" for lists written by
      older tools).
  Returns:
    (train, query, database) batches: uint8 images [n, image_size, image_size, 3],
    multi-hot bool labels [n, C]. Sizes unlike the preset's give a ``UserWarning``;
    images that would not fit in memory are refused before any is read.
  """
  return protocol


# ----------------------------------------------------------------------------- cross-view sets


def cross_view_file(name: str, root: str | os.PathLike) -> pathlib.Path:
  """The ``.mat`` file of cross-view set ``name``: ``root`` itself when it is a file, else
  ``root / file_name`` (the preset's conventional name); one error naming the path and the
  expected file name when neither is there."""
  preset = _preset(name, "cross-view-mat")
  if root is None:
    raise missing_root(name)
  if not isinstance(root, (str, os.PathLike)):
    raise ValueError(f"root must be a file or folder path; got {_checks.describe(root)}.")
  if not os.fspath(root).strip():  # "" would read the working directory
    raise ValueError(f"protocol {name!r}: root is empty; give the file or its folder.")
  path = pathlib.Path(root)
  if path.is_dir():
    path = path / preset.file_name
  if not path.is_file():
    raise FileNotFoundError(
      f"protocol {name!r}: no file {os.fspath(path)!r}; expected {preset.file_name} (or "
      f"root= the .mat file itself): {CROSS_VIEW_LAYOUT}."
    )
  return path


def _cross_view_label_problem(preset: PaperPreset, labels: list[np.ndarray]) -> str | None:
  """What makes ``labels`` (one array per split, as ``load_cross_modal_mat`` reads them)
  unlike the preset's, in words, or None. A single-label set (relevance "same_class")
  takes class ids of at most its classes or one-hot rows; a multi-label set multi-hot rows
  of one of its widths."""
  expected = " or ".join(str(c) for c in preset.num_labels)
  single = preset.relevance == "same_class"
  if labels[0].ndim == 1:
    classes = max((int(y.max()) + 1 for y in labels if y.size), default=0)
    if not single:
      return f"class ids (one label an item), not the {expected} multi-hot label columns"
    if classes > max(preset.num_labels):
      return f"class ids of {classes} classes, not {expected}"
    return None
  width = labels[0].shape[1]
  if width not in preset.num_labels:
    return f"{width} label columns, not {expected}"
  if single and any(np.any(y.sum(1) != 1) for y in labels):
    return f"rows with other than one label; its {expected} classes are one label an item"
  return None


def _check_cross_view_labels(name: str, path: pathlib.Path, splits: dict) -> None:
  """Labels as the preset's (``_cross_view_label_problem``), else one error naming both."""
  problem = _cross_view_label_problem(_PRESETS[name], [ds.labels for ds in splits.values()])
  if problem is not None:
    raise _errors.DataFormatError(
      f"{name}: {path} has {problem}. Is root the copy of this data set?"
    )


def _cross_view_note(name: str, sizes: dict[str, int], has_db: bool) -> str:
  """A line naming each split size that differs from the preset's (files vary), or ""."""
  preset = _PRESETS[name]
  wanted = {"query": preset.num_query, "train": preset.num_train, "database": preset.num_database}
  key = {"query": "te", "train": "tr", "database": "db" if has_db else "tr, no db"}
  differ = [
    f"{part} ({key[part]}) {sizes[part]:,} pairs, not {want:,}"
    for part, want in wanted.items()
    if want is not None and sizes[part] != want
  ]
  if not differ:
    return ""
  return (
    f"{name}: the file's splits are used as they are, unlike the preset's: {'; '.join(differ)} "
    f"({preset.source})."
  )


def _cross_view_batches(name, seed, root, limit):
  """The (train, query, database) batches of a cross-view set (``_cross_view_protocol``)."""
  _check_limit(limit)
  path = cross_view_file(name, root)
  splits = load_cross_modal_mat(path)
  _check_cross_view_labels(name, path, splits)
  has_db = "database" in splits
  for part, ds in splits.items():
    if ds.labels.shape[0] == 0:
      raise _errors.DataFormatError(f"{name}: {path}'s {part} split holds no item.")
  sizes = {"train": splits["train"].labels.shape[0], "query": splits["test"].labels.shape[0]}
  sizes["database"] = splits["database" if has_db else "train"].labels.shape[0]
  note = _cross_view_note(name, sizes, has_db)
  if note:
    warnings.warn(note, UserWarning, stacklevel=4)
  take = lambda ds, idx: {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}
  database_ds = splits["database" if has_db else "train"]
  database = _limit(np.arange(sizes["database"]), limit, seed)
  train = np.arange(sizes["train"]) if has_db else database
  query = np.arange(sizes["query"])
  return take(splits["train"], train), take(splits["test"], query), take(database_ds, database)


def _cross_view_protocol(name: str) -> Callable:
  preset = _PRESETS[name]

  def protocol(seed: int, *, root: str | os.PathLike, database_limit: int | None = None):
    return _cross_view_batches(name, seed, root, database_limit)

  protocol.__name__ = protocol.__qualname__ = name.replace("-", "_")
  protocol.__doc__ = f"""``{name}``, a cross-view set from its ``.mat`` file: {preset.note}

  Args:
    seed: the seed of ``database_limit``'s subset (the split is the file's).
    root: {CROSS_VIEW_LAYOUT}; the file itself, or a folder holding it as
      ``{preset.file_name}``.
    database_limit: None for the whole database, else a random subset (where the file
      has no database split, of the training set too, as it is the database).
  Returns:
    (train, query, database) batches: views (image float32 [n, d_image], text float32
    [n, d_text]); labels as ``load_cross_modal_mat`` reads them (class ids int32 [n] from
    0, or multi-hot bool [n, C]). Sizes unlike the preset's give a ``UserWarning``.
  """
  return protocol


_MAKERS = {
  "cifar-binary": _cifar10_protocol,
  "lists": _list_protocol,
  "cross-view-mat": _cross_view_protocol,
}
#: Protocol name -> function of ``seed`` and options: the ``PAPER_PRESETS`` and
#: ``CROSS_VIEW_PRESETS`` sets.
PAPER_PROTOCOLS: dict[str, Callable] = {
  name: _MAKERS[p.layout](name) for name, p in _PRESETS.items()
}

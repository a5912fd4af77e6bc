"""The ``Dataset`` container every loader returns, and the batch dict it turns into."""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import numpy as np

from jhash import _checks


class _NoExtras(dict):
  """The shared default of ``Dataset.extras``: an empty dict that refuses writes.

  A plain ``{}`` default would be one dict shared by every Dataset built without
  extras, so a write through one would show in all of them.
  """

  def _refuse(self, *args, **kwargs):
    raise TypeError(
      "this Dataset was built without extras; pass extras={...} to "
      "Dataset(...) or use dataset._replace(extras={...})."
    )

  __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = _refuse
  __ior__ = _refuse


_NO_EXTRAS = _NoExtras()


class Dataset(NamedTuple):
  """Aligned views of ``n`` items with their labels: plain NumPy arrays.

  Attributes:
    views: tuple of arrays, one per view, each with ``n`` rows: features
      ``[n, d]`` or images ``[n, H, W]`` / ``[n, H, W, C]``.
    labels: integer class ids ``[n]`` or multi-hot bool ``[n, C]``.
    view_names: one name per view, e.g. ``("image",)`` or ``("fou", "kar")``.
    name: the dataset's name, e.g. ``"fashion-mnist/train"``.
    extras: anything else a loader knows (e.g. a canvas's cell layout). Arrays in
      it whose first axis has ``n`` entries are per item, and ``take`` indexes them.
  """

  views: tuple[np.ndarray, ...]
  labels: np.ndarray
  view_names: tuple[str, ...]
  name: str = ""
  extras: dict[str, Any] = _NO_EXTRAS

  @property
  def num_items(self) -> int:
    return int(np.shape(self.labels)[0])

  def view(self, name: str) -> np.ndarray:
    """The view called ``name``."""
    if name not in self.view_names:
      raise KeyError(f"{self.name or 'dataset'} has no view {name!r}; views: {self.view_names}.")
    return self.views[self.view_names.index(name)]

  def take(self, index: Any) -> "Dataset":
    """The items at ``index`` (int array, bool mask or slice), per-item extras included."""
    _check_index(index, self.num_items)
    n = self.num_items
    extras = {k: (v[index] if _is_per_item(v, n) else v) for k, v in self.extras.items()}
    return self._replace(
      views=tuple(v[index] for v in self.views), labels=self.labels[index], extras=extras
    )

  def batch(self, index: Any = None) -> dict[str, Any]:
    """The library's batch dict ``{"views": tuple, "labels": array}`` (see ``as_batch``)."""
    return as_batch(self, index)


def _is_per_item(value: Any, n: int) -> bool:
  return isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == n


def as_batch(dataset: Dataset, index: Any = None) -> dict[str, Any]:
  """The batch dict methods take: ``{"views": tuple of arrays, "labels": array}``.

  Args:
    dataset: a ``Dataset``.
    index: ``None`` for all items, else an int array, bool mask or slice.
  Returns:
    ``{"views": tuple(view[index] ...), "labels": labels[index]}``: NumPy arrays,
    views and labels as the dataset holds them (no copy when ``index`` is None).
  """
  check_dataset(dataset)
  if index is None:
    return {"views": tuple(dataset.views), "labels": dataset.labels}
  _check_index(index, dataset.num_items)
  return {"views": tuple(v[index] for v in dataset.views), "labels": dataset.labels[index]}


def check_dataset(dataset: Any, name: str = "dataset") -> None:
  """``dataset`` must be a ``Dataset`` (a ValueError naming ``name`` otherwise)."""
  if not isinstance(dataset, Dataset):
    raise ValueError(
      f"{name} must be a jhash.data.Dataset (make_dataset); got {_checks.describe(dataset)}."
    )


def _check_index(index: Any, n: int) -> None:
  """``index``: a slice, a bool mask [n], or ints in [-n, n) (an int or an int array)."""
  if isinstance(index, slice):
    parts = (index.start, index.stop, index.step)
    if any(p is not None and not isinstance(p, (int, np.integer)) for p in parts):
      raise ValueError(f"index: a slice's start, stop and step must be ints or None; got {index}.")
    if index.step == 0:
      raise ValueError(f"index: a slice's step must not be 0; got {index}.")
    return
  a = np.asarray(index)
  if (a.dtype == np.bool_ and a.shape == (n,)) or (a.size == 0 and a.ndim == 1):
    return
  expected = f"a slice, a bool mask [{n}] or integer positions in [-{n}, {n})"
  if a.dtype == np.bool_ or a.dtype.kind not in "iu" or a.ndim > 1:
    raise ValueError(f"index must be {expected}; got {_checks.describe(index)}.")
  if a.size and (a.min() < -n or a.max() >= n):
    raise ValueError(
      f"index must be {expected} (the dataset holds {n} items); found {a.min()}..{a.max()}."
    )


def check_batch(batch: Any) -> int:
  """Check a batch dict at the door of a public function; return its item count.

  See ``jhash._checks.batch`` for the rules; every error is a ``ValueError``
  naming ``views``, ``views[i]`` or ``labels``.
  """
  return _checks.batch(batch)


def make_dataset(
  views, labels, view_names, name: str, extras: Mapping[str, Any] | None = None
) -> Dataset:
  """A ``Dataset``, checked: views of equal length, finite features, valid labels."""
  views = tuple(views)
  view_names = tuple(view_names)
  if len(view_names) != len(views):
    raise ValueError(f"view_names must name each of the {len(views)} views; got {view_names}.")
  _checks.batch({"views": views, "labels": labels})
  return Dataset(
    views=views,
    labels=labels,
    view_names=view_names,
    name=name,
    extras=dict(extras) if extras else {},
  )

"""Minibatches over a mesh whose ``"data"`` axis may span several processes.

Each process passes its own rows of every global minibatch (as ``jhash.data.image_pipeline``
reads them: process ``p`` of ``P`` the ``p``-th block of ``batch_size / P`` rows) and
``global_minibatch`` joins them into one global array split over the axis
(``jax.make_array_from_process_local_data``). With one process a process's rows are the
whole minibatch, and the result is that minibatch split over the devices.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding


def local_rows(sharding: NamedSharding, num_rows: int) -> int:
  """How many of ``num_rows`` rows, split by ``sharding`` along axis 0, this process
  holds (rows held by several of its devices counted once)."""
  held = sharding.addressable_devices_indices_map((num_rows,)).values()
  spans = {(s[0].start or 0, num_rows if s[0].stop is None else s[0].stop) for s in held}
  return sum(stop - start for start, stop in spans)


def global_minibatch(minibatch: dict, sharding: NamedSharding, num_rows: int) -> dict:
  """Every array of ``minibatch`` (this process's rows) joined with the other processes'
  into one global array of ``num_rows`` rows split by ``sharding``."""

  def join(x):
    x = np.asarray(x)
    return jax.make_array_from_process_local_data(sharding, x, (num_rows,) + x.shape[1:])

  return jax.tree.map(join, minibatch)


def whole_minibatch(minibatch: dict) -> dict:
  """Every process's rows of ``minibatch``, in process order, on every process (a
  collective; the minibatch itself, as NumPy, with one process)."""
  return jax.tree.map(
    lambda x: np.asarray(multihost_utils.process_allgather(np.asarray(x), tiled=True)),
    minibatch,
  )

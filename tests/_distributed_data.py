"""The data of the two-process tests, made the same way by the workers and the test."""

import jax
import numpy as np

import jhash
import jhash.data


def search_data():
  """Queries and a database of 1,001 codes (shards of 251 rows over 4 devices, the last
  with 248 real ones); the 40 nearest codes of query 0 lie in the last shard, and k
  reaches past a shard's rows."""
  rng = np.random.default_rng(0)
  num_bits, n = 40, 1001
  signs = np.where(rng.random((n, num_bits)) < 0.5, 1, -1).astype(np.int8)
  signs[-40:] = signs[0]  # query 0's nearest are in the last shard
  signs[-40:, :3] *= -1
  db = np.asarray(jhash.codes.pack_bits(signs))
  queries = np.concatenate([db[:3], db[-2:]])
  return queries, db, num_bits, 300


def multi_code_data():
  """Two codes an item (the search data's codes and each one's neighbour), the second
  held by about half of the items."""
  queries, db, num_bits, k = search_data()
  codes = np.stack([db, np.roll(db, 1, axis=0)], axis=1)
  held = np.ones((db.shape[0], 2), bool)
  held[:, 1] = np.random.default_rng(1).random(db.shape[0]) < 0.5
  return queries, codes, held, num_bits, k


def saved_state():
  """ITQ on 64 random items: (method, batch, state), the same on every process."""
  rng = np.random.default_rng(2)
  batch = {"views": (rng.normal(size=(64, 12)).astype(np.float32),)}
  method = jhash.methods.itq(8, num_iters=3)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  return method, batch, state


def map_data():
  """Query and database codes in {-1, +1} with multi-hot labels: 20 queries, 1,001 items."""
  rng = np.random.default_rng(1)
  q = np.where(rng.random((20, 16)) < 0.5, 1, -1).astype(np.int8)
  db = np.where(rng.random((1001, 16)) < 0.5, 1, -1).astype(np.int8)
  return q, db, rng.random((20, 5)) < 0.3, rng.random((1001, 5)) < 0.3


def cdh_data():
  """301 mfeat items, two views, and CDH's options (one sweep)."""
  rng = np.random.default_rng(0)
  ds = jhash.data.load_mfeat(["fou", "kar"])
  idx = np.sort(rng.choice(ds.labels.size, 301, replace=False))
  batch = {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}
  return batch, dict(w_iters=20, max_inner=8)


def fit_data():
  """A small labelled set and a deep method with BatchNorm (moments over devices)."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(128, 20)).astype(np.float32)
  batch = {"views": (x,), "labels": rng.integers(0, 4, 128).astype(np.int32)}
  net = jhash.models.backbone((20,), 8, batch_norm=True)
  return batch, jhash.methods.pairwise(8, backbone=net, batch_size=32, num_epochs=2)


def stream_steps() -> int:
  """The steps of the run fed by an iterable: two epochs of ``fit_data``'s set."""
  return 2 * 128 // 32

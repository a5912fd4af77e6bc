"""MCH's controls, scored beside MCH on the same trained state (``evaluation.controls``).

For a trained MCH state, the database is coded with other rules for which crop codes an
item keeps (``jhash.methods.mch_parts``), and each is scored as MCH's ``_multi`` numbers
are (queries keep their single code; an item is found at the nearest of its codes):

* ``control=all``: every crop's code kept;
* ``control=random``: each crop kept with the probability that matches MCH's codes per item;
* ``control=oracle``: the crops whose keep reward against the training items is positive,
  read with the item's own labels; ``oracle_keep_fraction`` is that share of the crops, the
  check worth making before any agent trains;
* ``control=items`` (scenes only): each object of the item coded alone where it stands
  (``jhash.data.scene_items_alone``): the positive control, the best extra codes a crop
  agent could hope for.

Each reports ``METRIC_multi@control=NAME`` for the metrics of ``METRICS``. On scenes the
base's and MCH's numbers are also split by the query's number of objects:
``METRIC@query_objects=N`` (the base) and ``METRIC_multi@query_objects=N`` (MCH).
"""

from __future__ import annotations

import jax
import numpy as np

import jhash
from jhash.methods import mch_parts

METRICS = (
  "map",
  "precision_radius_0",
  "recall_radius_0",
  "precision_radius_2",
  "recall_radius_2",
)
CHUNK = 1000  # database items per block of the oracle's rewards


def _scores(q_codes, q_labels, codes, mask, labels) -> dict:
  args = (q_codes, codes, q_labels, labels)
  out = {"map": float(jhash.metrics.mean_average_precision(*args, db_mask=mask))}
  for r in (0, 2):
    p, rec = jhash.metrics.precision_recall_at_radius(*args, r, db_mask=mask)
    out[f"precision_radius_{r}"], out[f"recall_radius_{r}"] = float(p), float(rec)
  out["codes_per_item"] = float(np.mean(np.sum(np.asarray(mask), axis=1)))
  return out


def oracle_mask(method, state, train, whole, crops, labels) -> np.ndarray:
  """bool [n, 5]: the database crops whose keep reward against the training items is > 0."""
  others = jhash.encode(method, state, train)
  table = method.extras.base.extras.code_loss(state.base)
  oracle = jax.jit(mch_parts.oracle_keep)
  parts = []
  for start in range(0, whole.shape[0], CHUNK):
    stop = start + CHUNK
    similarity = jhash.losses.label_similarity(labels[start:stop], train["labels"])
    parts.append(
      np.asarray(oracle(whole[start:stop], crops[start:stop], others, similarity, table))
    )
  return np.concatenate(parts) if parts else np.zeros((0, crops.shape[1]), bool)


def control_metrics(
  method, state, train, query, database, key, items=None, query_objects=None
) -> dict:
  """The controls' numbers (module docstring) for a trained MCH ``state``.

  Args:
    method, state: the MCH method and its trained state.
    train, query, database: the protocol's batches.
    key: the random control's key.
    items: optional (images [n, M, ...], present bool [n, M]) of the database's objects
      alone (``scene_items_alone``), for the positive control.
    query_objects: optional int [q], each query's number of objects: the base's and MCH's
      numbers per value.
  """
  whole, crops, keep = method.extras.crop_codes(state, database)
  mch_codes, mch_mask = jhash.encode_multi(method, state, database)
  q_codes, q_labels, labels = (
    jhash.encode(method, state, query),
    query["labels"],
    database["labels"],
  )
  oracle = oracle_mask(method, state, train, whole, crops, labels)
  rules = {
    "all": mch_parts.keep_all(keep),
    "random": mch_parts.keep_at_random(key, keep.shape, mch_parts.matching_rate(mch_mask)),
    "oracle": oracle,
  }
  extra = {name: crops for name in rules}
  if items is not None:
    images, present = items
    n, m = present.shape
    flat = {"views": (images.reshape((n * m,) + images.shape[2:]),)}
    codes = jhash.encode(method.extras.base, state.base, flat)
    rules["items"], extra["items"] = present, np.asarray(codes).reshape(n, m, -1)
  out = {"oracle_keep_fraction": float(np.mean(oracle))}
  if query_objects is not None:
    single = np.ones((whole.shape[0], 1), bool)
    for count in np.unique(query_objects):
      rows = np.flatnonzero(np.asarray(query_objects) == count)
      qc, ql = np.asarray(q_codes)[rows], np.asarray(q_labels)[rows]
      base = _scores(qc, ql, np.asarray(whole)[:, None], single, labels)
      multi = _scores(qc, ql, mch_codes, mch_mask, labels)
      out.update({f"{k}@query_objects={count}": v for k, v in base.items() if k in METRICS})
      out.update({f"{k}_multi@query_objects={count}": v for k, v in multi.items() if k in METRICS})
  for name, rule in rules.items():
    codes, mask = mch_parts.kept_codes(whole, extra[name], rule)
    scores = _scores(q_codes, q_labels, codes, mask, labels)
    out.update({f"{k}_multi@control={name}": v for k, v in scores.items()})
  return out

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

``diagnose=True`` asks why an agent keeps what it keeps (``agent_diagnosis``): whether
its keep probabilities rank the database's crops as the oracle does, and whether a
network of the policy's shape, trained by plain supervision from the same states to the
oracle's labels on the training items' crops, can tell them apart. A state that carries
the oracle's information (a probe AUC well above 0.5) and an agent that does not use it
say the policy-gradient training fails; a probe at chance says the state lacks it.
"""

from __future__ import annotations

import jax
import numpy as np
import scipy.stats

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
KEEP_QUANTILES = (0.1, 0.5, 0.9, 0.99)  # of the agent's keep probabilities
PROBE = {"hidden": (512, 256, 128, 64), "num_epochs": 10, "batch_size": 256}


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


def roc_auc(scores, labels) -> float:
  """Area under the ROC curve of ``scores`` [n] for bool ``labels`` [n]: the chance that a
  positive outscores a negative, ties counted half (Mann-Whitney); nan without both."""
  scores, labels = np.ravel(np.asarray(scores, np.float64)), np.ravel(np.asarray(labels, bool))
  pos, neg = int(labels.sum()), int((~labels).sum())
  if pos == 0 or neg == 0:
    return float("nan")
  ranks = scipy.stats.rankdata(scores)  # ties get their mean rank
  return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def top_fraction(scores, fraction: float) -> np.ndarray:
  """bool, the shape of ``scores``: the ``round(fraction * size)`` highest scores."""
  scores = np.asarray(scores)
  count = int(round(float(fraction) * scores.size))
  keep = np.zeros(scores.size, bool)
  keep[np.argsort(-scores.ravel(), kind="stable")[:count]] = True
  return keep.reshape(scores.shape)


def train_probe(states, labels, key):
  """A network of the policy's shape (``PROBE``) trained by cross-entropy from states
  float32 [n, D] to bool labels [n]; returns p(label) of new states as a function."""
  probe = jhash.methods.classifier(
    2,
    backbone=jhash.models.model(jhash.models.MLP(2, PROBE["hidden"], batch_norm=True)),
    batch_size=PROBE["batch_size"],
    num_epochs=PROBE["num_epochs"],
    name="probe",
  )
  batch = {"views": (np.asarray(states, np.float32),), "labels": np.asarray(labels, np.int32)}
  state, _ = jhash.fit(probe, key, batch, progress=False)

  def positive(new_states):
    new = {"views": (np.asarray(new_states, np.float32),)}
    logits = probe.extras.coder.scores(state.coder, new)
    return np.asarray(jax.nn.softmax(logits, axis=-1)[:, 1])

  return positive


def agent_diagnosis(method, state, train, database, keep, oracle, key) -> tuple[dict, dict]:
  """Why the agent keeps what it keeps (module docstring).

  Args:
    method, state: the trained MCH method and state.
    train, database: the protocol's batches (the probe learns from the training items'
      crops, labelled by their own oracle against the training items, and is scored on
      the database's).
    keep: float32 [n, 5], the agent's keep probabilities of the database's crops.
    oracle: bool [n, 5], the database crops of positive reward (``oracle_mask``).
    key: the probe's key.
  Returns:
    (numbers, rules): ``agent_auc`` and ``probe_auc`` (against ``oracle``),
    ``probe_train_auc``, ``keep_probability_qQ`` for Q in ``KEEP_QUANTILES``,
    ``train_oracle_fraction``; and two keep rules for ``kept_codes``: ``probe`` (its
    p > 0.5) and ``agent_ranked`` (the agent's most probable crops, as many as the oracle
    keeps).
  """
  whole, crops, _ = method.extras.crop_codes(state, train)
  target = oracle_mask(method, state, train, whole, crops, train["labels"])
  states = np.asarray(method.extras.crop_states(state, train))
  positive = train_probe(states.reshape(-1, states.shape[-1]), target.ravel(), key)
  db_states = np.asarray(method.extras.crop_states(state, database))
  probe_db = positive(db_states.reshape(-1, db_states.shape[-1])).reshape(keep.shape)
  probe_train = positive(states.reshape(-1, states.shape[-1]))
  keep = np.asarray(keep)
  numbers = {
    "agent_auc": roc_auc(keep, oracle),
    "probe_auc": roc_auc(probe_db, oracle),
    "probe_train_auc": roc_auc(probe_train, target),
    "train_oracle_fraction": float(np.mean(target)),
  }
  for q in KEEP_QUANTILES:
    numbers[f"keep_probability_q{q:g}"] = float(np.quantile(keep, q))
  rules = {"probe": probe_db > 0.5, "agent_ranked": top_fraction(keep, np.mean(oracle))}
  return numbers, rules


def control_metrics(
  method, state, train, query, database, key, items=None, query_objects=None, diagnose=False
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
    diagnose: also ``agent_diagnosis``: its numbers, and its rules ``probe`` and
      ``agent_ranked`` scored as the controls are.
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
  if diagnose:
    numbers, more = agent_diagnosis(
      method, state, train, database, keep, oracle, jax.random.fold_in(key, 1)
    )
    out.update(numbers)
    rules.update(more)
    extra.update({name: crops for name in more})
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

"""Metrics inside jit and vmap: traced codes, labels, masks and weights give what the
eager call gives (to float rounding), as arrays; an evaluation of a trained state is one
jitted function; ``deephash_map``, a host preset, says so under a trace."""

import jax
import numpy as np
import pytest

import jhash
from jhash import metrics


def _corpus(multi_hot=False, seed=0):
  rng = np.random.default_rng(seed)

  def codes(*shape):
    return np.where(rng.normal(size=shape) > 0, 1, -1).astype(np.int8)

  if multi_hot:
    labels = rng.uniform(size=(40, 4)) > 0.6
  else:
    labels = rng.integers(0, 3, 40).astype(np.int32)
  return codes(8, 16), codes(32, 16), labels[:8], labels[8:]


WEIGHTS = np.linspace(0.5, 1.5, 16).astype(np.float32)
# Each metric as a function of (query codes, db codes, query labels, db labels).
CALLS = {
  "ap": lambda *a: metrics.average_precisions(*a),
  "map": lambda *a: metrics.mean_average_precision(*a),
  "map@10 by index, retrieved": lambda *a: metrics.mean_average_precision(
    *a, top_k=10, ties="index", normalizer="retrieved"
  ),
  "map skip": lambda *a: metrics.mean_average_precision(*a, no_relevant="skip"),
  "weighted map": lambda *a: metrics.mean_average_precision(*a, weights=WEIGHTS),
  "weighted_mean_average_precision": lambda *a: metrics.weighted_mean_average_precision(
    *a, WEIGHTS
  ),
  "precision_at_k": lambda *a: metrics.precision_at_k(*a, [1, 5, 32]),
  "recall_at_k": lambda *a: metrics.recall_at_k(*a, [1, 5]),
  "ndcg_at_k": lambda *a: metrics.ndcg_at_k(*a, 5),
  "pr_curve_by_radius": lambda *a: metrics.pr_curve_by_radius(*a),
  "pooled pr_curve_by_radius": lambda *a: metrics.pr_curve_by_radius(*a, average="pooled"),
  "precision_recall_at_radius": lambda *a: metrics.precision_recall_at_radius(*a, 2),
  "f1_bucket_curve": lambda *a: metrics.f1_bucket_curve(*a),
}


def _close(traced, eager):
  assert jax.tree.structure(traced) == jax.tree.structure(eager)
  for t, e in zip(jax.tree.leaves(traced), jax.tree.leaves(eager)):
    assert isinstance(t, jax.Array)  # arrays under a trace, not floats
    np.testing.assert_allclose(np.asarray(t), np.asarray(e), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("multi_hot", [False, True], ids=["class ids", "multi-hot"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_metric_under_jit_and_vmap_is_the_eager_metric(name, multi_hot):
  call, args = CALLS[name], _corpus(multi_hot)
  eager = call(*args)
  _close(jax.jit(call)(*args), eager)  # codes and labels traced
  # vmap over two query sets: each row is that query set's eager metric.
  q, db, ql, dl = args
  q2, _, ql2, _ = _corpus(multi_hot, seed=1)
  both = jax.vmap(call, in_axes=(0, None, 0, None))(np.stack([q, q2]), db, np.stack([ql, ql2]), dl)
  _close(jax.tree.map(lambda x: x[0], both), eager)
  _close(jax.tree.map(lambda x: x[1], both), call(q2, db, ql2, dl))


def test_multi_code_items_with_a_traced_mask():
  q, _, ql, dl = _corpus()
  rng = np.random.default_rng(2)
  db = np.where(rng.normal(size=(32, 3, 16)) > 0, 1, -1).astype(np.int8)
  mask = rng.uniform(size=(32, 3)) > 0.4
  mask[:, 0] = True

  def call(m):
    return metrics.mean_average_precision(q, db, ql, dl, db_mask=m)

  _close(jax.jit(call)(mask), call(mask))


def test_an_evaluation_of_a_trained_state_is_one_jitted_function():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(120, 12)).astype(np.float32)
  labels = rng.integers(0, 4, 120).astype(np.int32)
  method = jhash.methods.itq(8, num_iters=4)
  state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)

  def evaluate(state, x, labels):
    codes = jhash.encode(method, state, {"views": (x,)})
    return metrics.mean_average_precision(codes[:20], codes[20:], labels[:20], labels[20:])

  _close(jax.jit(evaluate)(state, x, labels), evaluate(state, x, labels))


def test_deephash_map_under_a_trace_names_the_traceable_rule():
  args = _corpus()
  with pytest.raises(TypeError, match="cannot run inside jit.*ties='index'"):
    jax.jit(lambda *a: metrics.deephash_map(*a, 10))(*args)

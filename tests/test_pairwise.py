"""jhash.methods.pairwise: a deep method from a pairwise loss, with an optional memory bank."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
from jhash.methods import _pairwise


def _learnable(rng, n=256, d=8):
  x = rng.normal(size=(n, d)).astype(np.float32)
  return {"views": (x,), "labels": ((x[:, 0] > 0) + 2 * (x[:, 1] > 0)).astype(np.int32)}


def test_pairs_with_memory_leave_out_the_items_themselves_and_unfilled_rows():
  labels = jnp.asarray([0, 1, 0], jnp.int32)
  memory = _pairwise.Memory(jnp.zeros((5, 2)), jnp.asarray([0, 1, 1, 0, 0], jnp.int32),
                            jnp.asarray([True, True, False, True, True]))
  s, w = _pairwise.pairs_with_memory(labels, jnp.asarray([3, 1, 4]), memory)
  assert s.shape == (3, 3 + 5)
  counted = np.asarray(w) > 0
  expected = np.array([
      [0, 1, 1, 1, 1, 0, 0, 1],    # item 3: not itself (col 3+3), not unfilled row 2
      [1, 0, 1, 1, 0, 0, 1, 1],    # item 1: not memory row 1
      [1, 1, 0, 1, 1, 0, 1, 0],    # item 4: not memory row 4
  ], bool)
  np.testing.assert_array_equal(counted, expected)
  np.testing.assert_array_equal(np.asarray(s)[0, 3:], [1, 0, 0, 1, 1])
  np.testing.assert_allclose(np.asarray(w).sum(), expected.sum(), rtol=1e-6)


def test_memory_holds_every_item_after_an_epoch(rng):
  batch = _learnable(rng, n=96)
  method = jhash.methods.pairwise(6, batch_size=32, num_epochs=1, memory=True)
  state, _ = jhash.fit(method, jax.random.key(1), batch, progress=False)
  assert bool(state.memory.filled.all())
  np.testing.assert_array_equal(state.memory.labels, batch["labels"])
  # The last minibatch's rows hold its outputs under the parameters before the last step.
  assert float(jnp.abs(state.memory.outputs).min()) > 0


def test_activation_sees_the_optimizer_step(rng):
  seen = []
  def activation(logits, step):
    jax.debug.callback(lambda s: seen.append(int(s)), step)
    return jnp.tanh(logits)
  method = jhash.methods.pairwise(4, batch_size=32, activation=activation)
  jhash.fit(method, jax.random.key(0), _learnable(rng, n=64), num_steps=4, progress=False)
  assert sorted(seen) == [0, 1, 2, 3]


def test_a_users_own_loss_is_one_function_and_a_call(rng):
  # The README's example of a new method: any function of (u, v, similarity, weights).
  def my_loss(u, v, similarity, weights):
    target = 2.0 * similarity - 1.0
    inner = jnp.tanh(u) @ jnp.tanh(v).T / u.shape[1]
    return jnp.sum(weights * (inner - target) ** 2) / jnp.sum(weights)

  batch = _learnable(rng)
  method = jhash.methods.pairwise(8, my_loss, batch_size=64, num_epochs=6)
  key = jax.random.key(0)
  state, history = jhash.fit(method, key, batch, progress=False)
  labels = batch["labels"]
  def train_map(st):
    codes = jhash.encode(method, st, batch)
    return jhash.metrics.mean_average_precision(codes, codes, labels, labels)
  assert history["loss"][-4:].mean() < history["loss"][:4].mean()
  assert train_map(state) > train_map(jhash.init(method, key, batch)) + 0.1


def test_bad_loss_and_missing_labels_name_themselves(rng):
  with pytest.raises(ValueError, match="loss"):
    jhash.methods.pairwise(8, "dch")
  method = jhash.methods.pairwise(8)
  with pytest.raises(ValueError, match="labels"):
    jhash.fit(method, jax.random.key(0), {"views": _learnable(rng)["views"]}, progress=False)

"""jhash.methods.pairwise: a deep method from a pairwise loss, with an optional memory bank."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
from jhash.methods import _memory


def _learnable(rng, n=256, d=8):
  x = rng.normal(size=(n, d)).astype(np.float32)
  return {"views": (x,), "labels": ((x[:, 0] > 0) + 2 * (x[:, 1] > 0)).astype(np.int32)}


def test_pairs_with_memory_leave_out_the_items_themselves_and_unfilled_rows():
  labels = jnp.asarray([0, 1, 0], jnp.int32)
  memory = _memory.Memory(
    jnp.zeros((5, 2)),
    jnp.asarray([0, 1, 1, 0, 0], jnp.int32),
    jnp.asarray([True, True, False, True, True]),
  )
  s, w = _memory.pairs_with_memory(labels, jnp.asarray([3, 1, 4]), memory)
  assert s.shape == (3, 3 + 5)
  counted = np.asarray(w) > 0
  expected = np.array(
    [
      [0, 1, 1, 1, 1, 0, 0, 1],  # item 3: not itself (col 3+3), not unfilled row 2
      [1, 0, 1, 1, 0, 0, 1, 1],  # item 1: not memory row 1
      [1, 1, 0, 1, 1, 0, 1, 0],  # item 4: not memory row 4
    ],
    bool,
  )
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


def _np_balanced_weights(s, mask):
  """Balanced pair weights by their definition: P / (2 P1) similar, P / (2 P0) dissimilar."""
  total, similar = mask.sum(), (mask * s).sum()
  dissimilar = total - similar
  return mask * np.where(s == 1, total / (2 * similar), total / (2 * dissimilar))


def _linear_state(method, x, y, key):
  """A method on a linear head (``hidden=()``) initialised on (x, y); its mean and scale."""
  state = jhash.init(method, key, {"views": (x,), "labels": y})
  mean, std = x.mean(axis=0), x.std(axis=0)
  np.testing.assert_allclose(state.coder.mean, mean, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(state.coder.scale, 1.0 / std, rtol=1e-5)
  return (
    state,
    lambda params, rows: (
      ((x[rows] - mean) / std) @ np.asarray(params["projection"]["kernel"])
      + np.asarray(params["projection"]["bias"])
    ),
  )


def test_update_with_memory_is_the_loss_on_in_batch_then_memory_pairs(rng):
  # One step by hand: u = tanh(standardised x W + c); pairs with the minibatch (not the
  # diagonal), then with the memory's filled rows other than the items themselves.
  n, k = 9, 4
  x = rng.normal(size=(n, 3)).astype(np.float32) * [1.0, 3.0, 0.5] + [0.0, 2.0, -1.0]
  y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 1], np.int32)

  def my_loss(u, v, similarity, weights):
    return jnp.sum(weights * (similarity - u @ v.T / u.shape[1]) ** 2) / jnp.sum(weights)

  net = jhash.models.backbone((3,), k, hidden=())
  method = jhash.methods.pairwise(
    k, my_loss, backbone=net, memory=True, activation=lambda z, step: jnp.tanh(z)
  )
  state, logits_of = _linear_state(method, x, y, jax.random.key(0))
  bank = rng.normal(size=(n, k)).astype(np.float32)
  filled = np.array([1, 1, 0, 1, 1, 1, 0, 1, 1], bool)
  state = state._replace(
    memory=_memory.Memory(jnp.asarray(bank), jnp.asarray(y), jnp.asarray(filled))
  )
  index = np.array([7, 2, 5])
  new, metrics = jax.jit(method.update)(
    state,
    {"views": (x[index],), "labels": y[index], "index": jnp.asarray(index)},
    jax.random.key(1),
  )
  logits = logits_of(state.coder.train.params, index)
  u = np.tanh(logits)
  v = np.concatenate([u, bank])
  s = (y[index][:, None] == np.concatenate([y[index], y])[None, :]).astype(np.float64)
  own = np.zeros((3, n), bool)
  own[np.arange(3), index] = True
  mask = np.concatenate([~np.eye(3, dtype=bool), filled[None, :] & ~own], axis=1)
  w = _np_balanced_weights(s, mask)
  want = np.sum(w * (s - u @ v.T / k) ** 2) / np.sum(w)
  np.testing.assert_allclose(metrics["loss"], want, rtol=1e-5)
  np.testing.assert_allclose(
    metrics["bit_balance"],
    np.mean(np.abs(np.mean(np.where(logits >= 0, 1.0, -1.0), axis=0))),
    rtol=1e-6,
  )
  # The memory: rows `index` hold the step's u (before the update) and labels, set filled.
  want_bank = bank.copy()
  want_bank[index] = u
  np.testing.assert_allclose(new.memory.outputs, want_bank, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(new.memory.labels, y)
  np.testing.assert_array_equal(new.memory.filled, filled | np.isin(np.arange(n), index))
  assert int(new.coder.train.step) == 1


def test_scores_are_the_heads_outputs_on_standardised_inputs(rng):
  x = rng.normal(size=(12, 3)).astype(np.float32) * [2.0, 0.5, 1.0] + [1.0, -3.0, 0.0]
  y = (x[:, 0] > 1.0).astype(np.int32)
  method = jhash.methods.pairwise(5, backbone=jhash.models.backbone((3,), 5, hidden=()))
  state, logits_of = _linear_state(method, x, y, jax.random.key(0))
  scores = np.asarray(method.extras.scores(state, {"views": (x,)}))
  np.testing.assert_allclose(
    scores, logits_of(state.coder.train.params, np.arange(12)), rtol=1e-5, atol=1e-5
  )
  np.testing.assert_array_equal(
    jhash.encode(method, state, {"views": (x,)}), np.where(scores >= 0, 1, -1)
  )


def test_bit_balance_is_the_mean_over_bits_of_each_bits_mean_code(rng):
  # A linear head of kernel 0 and bias c: every item's logits are c, so every item has the
  # code sign(c) = [+1, +1, -1, +1] (the 0 of bit 1 codes +1). Each bit is the same over
  # the minibatch: |mean over items| is 1 per bit, the bit balance 1 (the worst). (A mean
  # over each item's bits would give 0.5; the 0 coded 0 instead of +1, 0.75.)
  x = rng.normal(size=(12, 3)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  method = jhash.methods.pairwise(4, backbone=jhash.models.backbone((3,), 4, hidden=()))
  state = jhash.init(method, jax.random.key(0), {"views": (x,), "labels": y})
  head = {"kernel": jnp.zeros((3, 4)), "bias": jnp.asarray([2.0, 0.0, -1.0, 3.0])}
  state = state._replace(
    coder=state.coder._replace(train=state.coder.train._replace(params={"projection": head}))
  )
  _, metrics = jax.jit(method.update)(state, {"views": (x,), "labels": y}, jax.random.key(1))
  np.testing.assert_allclose(metrics["bit_balance"], 1.0, rtol=1e-6)

"""``jhash.network``: a method's network reached through public names — its features and
outputs for a trained state, its parameters to differentiate, a coder state put back —
for the deep pairwise models, HBMP's hash functions and MCH's base; refused for a method
with no network."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash


def _images(n=48):
  rng = np.random.default_rng(0)
  return {
    "views": (rng.uniform(size=(n, 12, 12)).astype(np.float32),),
    "labels": rng.integers(0, 3, n).astype(np.int32),
  }


def _features(n=60):
  rng = np.random.default_rng(1)
  return {
    "views": (rng.normal(size=(n, 10)).astype(np.float32),),
    "labels": rng.integers(0, 6, n).astype(np.int32),
  }


def _trained(method, batch):
  return jhash.fit(method, jax.random.key(0), batch, progress=False)[0]


@pytest.fixture(scope="module")
def dch():
  backbone = jhash.models.backbone((10,), 8, hidden=(16,))
  method = jhash.methods.dch(8, batch_size=20, num_epochs=1, backbone=backbone)
  batch = _features()
  return method, batch, _trained(method, batch)


def test_features_and_codes_of_a_trained_network(dch):
  method, batch, state = dch
  net = jhash.network(method)
  assert net.get(state) is state.coder
  features = np.asarray(net.coder.features(net.get(state), batch))
  out = net.coder.outputs(net.get(state), net.coder.read(batch))
  assert features.shape == (60, 16)
  np.testing.assert_allclose(features, np.asarray(out.features), rtol=1e-5, atol=1e-6)
  # The head reads these features; its signs are the method's codes.
  np.testing.assert_array_equal(
    np.where(np.asarray(out.logits) >= 0, 1, -1), jhash.encode(method, state, batch)
  )


def test_the_gradient_of_a_loss_of_the_parameters(dch):
  method, batch, state = dch
  net = jhash.network(method)
  coder_state, x = net.get(state), net.coder.read(batch)

  def loss(params):  # a new relaxed loss: push every logit towards +1
    return jnp.mean((net.coder.apply(coder_state, params, x).logits - 1.0) ** 2)

  params = coder_state.train.params
  # apply with the state's own parameters is outputs.
  np.testing.assert_array_equal(
    net.coder.apply(coder_state, params, x).logits, net.coder.outputs(coder_state, x).logits
  )
  value, grads = jax.value_and_grad(loss)(params)
  stepped = jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads)
  assert float(loss(stepped)) < float(value)  # a step down the gradient lowers the loss
  # Put the stepped network back: the method's encode sees it.
  moved = net.set(state, coder_state._replace(train=coder_state.train._replace(params=stepped)))
  assert type(moved) is type(state)
  codes = np.asarray(jhash.encode(method, moved, batch))
  signs = np.where(np.asarray(net.coder.apply(coder_state, stepped, x).logits) >= 0, 1, -1)
  np.testing.assert_array_equal(codes, signs)


def test_hbmp_hash_functions_and_mch_base_are_reached():
  batch = _features()
  hbmp = jhash.methods.hbmp(8, num_iters=2, hash_options={"num_epochs": 1})
  state = jhash.init(hbmp, jax.random.key(0), batch)  # where the network is: no training
  net = jhash.network(hbmp)
  assert net.get(state) is state.hashing
  scores = net.coder.scores(net.get(state), batch)
  np.testing.assert_array_equal(
    np.where(np.asarray(scores) >= 0, 1, -1), jhash.encode(hbmp, state, batch)
  )

  images = _images(32)
  mch = jhash.methods.mch(
    jhash.methods.dch(8, batch_size=16, num_epochs=1),
    agent_epochs=1,
    agent_batch_size=16,
    hidden=(8,),
  )
  state = jhash.init(mch, jax.random.key(0), images)
  net = jhash.network(mch)
  assert net.get(state) is state.base.coder
  again = net.set(state, net.get(state))
  assert jax.tree.structure(again) == jax.tree.structure(state)


def test_a_method_without_a_network_is_refused():
  with pytest.raises(ValueError, match="itq learns no network"):
    jhash.network(jhash.methods.itq(8))
  with pytest.raises(TypeError, match="method must be a jhash.HashingMethod"):
    jhash.network("dch")

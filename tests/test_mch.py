"""MCH: crops cut the right pixels, the reward equals its formula, REINFORCE's gradient is
the exact expected one, the policy learns which crops to keep, sigma = 1 is the base
model, the whole image is always kept, the agent's step is traced once, bad input named."""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jhash
from jhash import losses
from jhash import models
from jhash import training
from jhash.methods import mch_parts


# ------------------------------------------------------------------------------ crops


def test_fixed_boxes_are_the_four_corners_and_the_centre():
  boxes = mch_parts.fixed_boxes(8, 10, 0.5)
  np.testing.assert_array_equal(boxes, [[0, 0, 4, 5], [0, 5, 4, 5], [4, 0, 4, 5],
                                        [4, 5, 4, 5], [2, 2, 4, 5]])
  np.testing.assert_array_equal(mch_parts.fixed_boxes(7, 7, 0.3)[4], [2, 2, 2, 2])


def test_crops_cut_the_right_pixels():
  image = jnp.arange(8 * 10 * 2, dtype=jnp.float32).reshape(8, 10, 2)
  for top, left, h, w in mch_parts.fixed_boxes(8, 10, 0.5):
    want = np.asarray(image)[top:top + h, left:left + w]
    cut = mch_parts.fixed_crop(image, top, left, (int(h), int(w)), (int(h), int(w)))
    np.testing.assert_array_equal(cut, want)
    box = jnp.asarray([top, left, h, w], jnp.float32)
    np.testing.assert_allclose(mch_parts.crop_resize(image, box, (int(h), int(w))), want,
                               atol=1e-4)


def test_five_crops_resize_each_crop_to_the_image():
  rng = np.random.default_rng(0)
  images = rng.uniform(size=(3, 8, 10, 1)).astype(np.float32)
  crops = np.asarray(mch_parts.five_crops(images, 0.5))
  assert crops.shape == (3, 5, 8, 10, 1)
  for i in range(3):
    for c, (top, left, h, w) in enumerate(mch_parts.fixed_boxes(8, 10, 0.5)):
      want = jax.image.resize(images[i, top:top + h, left:left + w], (8, 10, 1), "linear")
      np.testing.assert_allclose(crops[i, c], want, atol=1e-5)
  np.testing.assert_array_equal(mch_parts.five_crops(images, 1.0),
                                np.repeat(images[:, None], 5, axis=1))


def test_random_crops_lie_inside_the_image_with_ratio_in_range():
  images = jnp.zeros((200, 28, 28, 1))
  crops, boxes = mch_parts.random_crops(jax.random.key(0), images, (0.3, 0.7))
  boxes = np.asarray(boxes)
  assert crops.shape == (200, 28, 28, 1)
  ratio = boxes[:, 2] / 28
  assert ratio.min() >= 0.3 and ratio.max() <= 0.7 and ratio.std() > 0.1
  assert (boxes[:, 0] >= 0).all() and (boxes[:, 0] + boxes[:, 2] <= 28 + 1e-4).all()
  assert (boxes[:, 1] >= 0).all() and (boxes[:, 1] + boxes[:, 3] <= 28 + 1e-4).all()
  # A crop of a constant-by-region image reads that region: left half 0, right half 1.
  image = jnp.concatenate([jnp.zeros((28, 14, 1)), jnp.ones((28, 14, 1))], axis=1)
  right = mch_parts.crop_resize(image, jnp.asarray([3.0, 16.0, 10.0, 10.0]), (28, 28))
  np.testing.assert_allclose(right, 1.0, atol=1e-6)


# ----------------------------------------------------------------------------- reward


def _hamming(a, b):
  return np.sum(a[:, None, :] != b[None, :, :], axis=-1)


def test_keep_rewards_equal_a_numpy_transcription():
  rng = np.random.default_rng(1)
  b, m, k = 5, 9, 12
  codes = rng.choice([-1.0, 1.0], size=(b, k))
  crops = rng.choice([-1.0, 1.0], size=(b, k))
  others = rng.choice([-1.0, 1.0], size=(m, k))
  sim = rng.integers(0, 2, size=(b, m)).astype(np.float32)
  w = rng.uniform(size=(b, m)).astype(np.float32)
  w[0] = 0.0                                            # no counted pair: reward 0
  table = rng.normal(size=(2, k + 1)).astype(np.float32)
  got = losses.keep_rewards(jnp.asarray(codes), jnp.asarray(crops), jnp.asarray(others),
                            jnp.asarray(sim), jnp.asarray(w), jnp.asarray(table))
  want = np.zeros(b)
  d, dc = _hamming(codes, others), _hamming(crops, others)
  for i in range(b):
    total = 0.0
    for j in range(m):
      s = int(sim[i, j])
      total += w[i, j] * (table[s, d[i, j]] - table[s, min(d[i, j], dc[i, j])])
    want[i] = total / w[i].sum() if w[i].sum() > 0 else 0.0
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_code_loss_table_is_the_loss_on_codes_at_each_distance():
  k = 6
  table = np.asarray(losses.code_loss_table(losses.pairwise_likelihood, k))
  for s in (0, 1):
    for d in range(k + 1):
      other = np.ones(k)
      other[:d] = -1
      want = losses.pairwise_likelihood(jnp.ones((1, k)), jnp.asarray(other[None]),
                                        jnp.full((1, 1), float(s)), jnp.ones((1, 1)))
      np.testing.assert_allclose(table[s, d], want, rtol=1e-6)
  # Similar pairs lose more the farther apart, dissimilar ones less.
  assert np.all(np.diff(table[1]) > 0) and np.all(np.diff(table[0]) < 0)


@pytest.mark.parametrize("name", ["ksh", "hashnet", "dch", "adsh"])
def test_base_pair_loss_on_codes_rewards_nearer_similar_items(name):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(16, 4)).astype(np.float32)
  method = jhash.methods.REGISTRY[name](8)
  state = jhash.init(method, jax.random.key(0), {"views": (x,), "labels": np.arange(16) % 2})
  table = np.asarray(method.extras.code_loss(state))
  assert table.shape == (2, 9)
  assert np.all(np.diff(table[1]) >= 0) and table[1, -1] > table[1, 0]
  assert np.all(np.diff(table[0]) <= 0) and table[0, 0] > table[0, -1]


# -------------------------------------------------------------------------- REINFORCE


def test_reinforce_gradient_is_the_exact_expected_gradient():
  """Two states, tabular logits: averaging the estimator's gradient over every joint
  action, weighted by its probability, gives minus the gradient of the expected reward,
  whatever the baseline."""
  theta = jnp.asarray([[0.3, -0.2], [-0.5, 0.4]])          # logits [state, action]
  reward = jnp.asarray([1.5, -0.7])                         # keep rewards; discard 0

  def expected_reward(t):
    return jnp.mean(jax.nn.softmax(t, axis=-1)[:, 1] * reward)

  exact = -jax.grad(expected_reward)(theta)
  probs = np.asarray(jax.nn.softmax(theta, axis=-1))
  for baseline in (0.0, 0.8):
    total = jnp.zeros_like(theta)
    for a0, a1 in itertools.product((0, 1), repeat=2):
      actions = jnp.asarray([a0, a1])
      adv = reward * actions - baseline
      g = jax.grad(lambda t: losses.reinforce_loss(t, actions, adv))(theta)
      total = total + probs[0, a0] * probs[1, a1] * g
    np.testing.assert_allclose(total, exact, rtol=1e-5, atol=1e-7)


def _agent(dim, seed=0):
  net = models.model(models.PolicyMLP((32, 32, 16, 16)))
  opt = optax.adam(3e-3)
  state = training.create(net, opt, jax.random.key(seed), jnp.zeros((2, dim)))
  return net, opt, mch_parts.AgentState(state, jnp.zeros(()), jnp.ones(()))


def test_policy_learns_to_keep_a_rewarded_crop_and_drop_an_unrewarded_one():
  rng = np.random.default_rng(0)
  good, bad = rng.normal(size=(2, 10)).astype(np.float32)
  net, opt, agent = _agent(10)
  states = jnp.asarray(np.stack([good, bad] * 16))
  noise = jax.random.normal(jax.random.key(5), (400,) + states.shape) * 0.1
  rewards = jnp.asarray([1.0, -1.0] * 16)
  def step(a, i):
    return mch_parts.policy_step(net, opt, a, states + noise[i], rewards,
                                 jax.random.fold_in(jax.random.key(1), i), 0.9)
  before = mch_parts.keep_probability(net, agent.policy, states[:2])
  agent, metrics = jax.jit(lambda a: jax.lax.scan(step, a, jnp.arange(400)))(agent)
  metrics = jax.tree.map(lambda m: m[-20:].mean(), metrics)
  after = np.asarray(mch_parts.keep_probability(net, agent.policy, states[:2]))
  assert after[0] > 0.9 and after[1] < 0.1, (before, after)
  assert float(metrics["reward"]) > 0.4


# ------------------------------------------------------------------------- the method


@pytest.fixture(scope="module")
def tiny():
  """64 28 x 28 images of two kinds (a bright left or right half) and their labels."""
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 2, 64).astype(np.int32)
  images = rng.uniform(0, 0.3, size=(64, 28, 28)).astype(np.float32)
  images[labels == 0, :, :14] += 0.7
  images[labels == 1, :, 14:] += 0.7
  return {"views": (images,), "labels": labels}


@pytest.fixture(scope="module")
def fitted(tiny):
  base = jhash.methods.dch(8, batch_size=32, num_epochs=2)
  method = jhash.methods.mch(base, sigma=0.5, agent_epochs=2, agent_batch_size=32)
  state, history = jhash.fit(method, jax.random.key(0), tiny, progress=False)
  return base, method, state, history


def test_mch_trains_the_base_then_the_agent(fitted, tiny):
  base, method, state, history = fitted
  assert [p.name for p in method.phases] == ["dch", "agent"]
  assert history["loss"].shape == (4,) and history["agent_loss"].shape == (4,)
  assert np.all(np.isfinite(history["agent_loss"]))
  # The memory holds every training image's whole-image code after an epoch.
  assert bool(state.memory.filled.all())
  np.testing.assert_array_equal(state.memory.outputs,
                                jhash.encode(base, state.base, tiny).astype(np.float32))


def test_whole_image_code_is_kept_and_is_the_base_models_code(fitted, tiny):
  base, method, state, _ = fitted
  codes, mask = jhash.encode_multi(method, state, tiny)
  assert codes.shape == (64, 6, 8) and mask.shape == (64, 6)
  assert bool(np.all(mask[:, 0]))
  np.testing.assert_array_equal(codes[:, 0], jhash.encode(base, state.base, tiny))
  np.testing.assert_array_equal(jhash.encode(method, state, tiny), codes[:, 0])
  chunked, chunked_mask = jhash.encode_multi(method, state, tiny, chunk_size=24)
  np.testing.assert_array_equal(chunked, codes)
  np.testing.assert_array_equal(chunked_mask, mask)
  empty = {"views": (tiny["views"][0][:0],), "labels": tiny["labels"][:0]}
  assert jhash.encode_multi(method, state, empty)[0].shape == (0, 6, 8)
  # Kept crops: probability above xi and a code not already kept for the item.
  keep = np.asarray(method.extras.keep_probabilities(state, tiny)) > 0.5
  c = np.asarray(codes)
  for i in range(64):
    seen = [c[i, 0]]
    for j in range(5):
      new = keep[i, j] and not any((c[i, j + 1] == s).all() for s in seen)
      assert bool(mask[i, j + 1]) == new
      if new:
        seen.append(c[i, j + 1])


def test_sigma_one_is_the_base_model_exactly(fitted, tiny):
  base, method, state, _ = fitted
  whole = jhash.methods.mch(base, sigma=1.0, xi=0.01)      # keeps every crop it may
  codes, mask = jhash.encode_multi(whole, state, tiny)
  assert not np.any(mask[:, 1:])
  single = jhash.encode(base, state.base, tiny)
  np.testing.assert_array_equal(codes[:, 0], single)
  labels = tiny["labels"]
  m_multi = jhash.metrics.mean_average_precision(single, codes, labels, labels, db_mask=mask)
  m_single = jhash.metrics.mean_average_precision(single, single, labels, labels)
  assert float(m_multi) == float(m_single)


def test_agent_step_is_traced_once(fitted, tiny):
  _, method, state, _ = fitted
  step = jax.jit(chex.assert_max_traces(method.phases[-1].update, n=1))
  for i in range(3):
    index = np.arange(32) + 16 * i
    batch = {"views": (tiny["views"][0][index],), "labels": tiny["labels"][index],
             "index": jnp.asarray(index, jnp.int32)}
    state, _ = step(state, batch, jax.random.key(i))
  assert np.isfinite(float(state.agent.reward_scale))


# -------------------------------------------------------------------------- bad input


def test_bad_input_is_named(tiny):
  base = jhash.methods.dch(8, batch_size=32, num_epochs=1)
  for bad in (0.0, 1.5, -0.1, "half"):
    with pytest.raises(ValueError, match="sigma"):
      jhash.methods.mch(base, sigma=bad)
    with pytest.raises(ValueError, match="xi"):
      jhash.methods.mch(base, xi=bad)
  with pytest.raises(ValueError, match="crop_range"):
    jhash.methods.mch(base, crop_range=(0.6, 0.4))
  with pytest.raises(ValueError, match="base"):
    jhash.methods.mch(jhash.methods.itq(8))
  with pytest.raises(ValueError, match="smaller than a pixel"):
    jhash.fit(jhash.methods.mch(base, sigma=0.02), jax.random.key(0), tiny, progress=False)
  flat = {"views": (tiny["views"][0].reshape(64, -1),), "labels": tiny["labels"]}
  with pytest.raises(ValueError, match="images"):
    jhash.fit(jhash.methods.mch(jhash.methods.dch(8, batch_size=32, num_epochs=1)),
              jax.random.key(0), flat, progress=False)


def test_crop_augmentation_of_the_base_model():
  from jhash.methods import _pairwise
  x = jax.random.uniform(jax.random.key(0), (40, 28, 28, 1))
  key = jax.random.key(1)
  always = _pairwise._augmentation((0.4, 0.6), 1.0)(x, key)
  want, _ = mch_parts.random_crops(jax.random.split(key)[0], x, (0.4, 0.6))
  np.testing.assert_array_equal(always, want)
  np.testing.assert_array_equal(_pairwise._augmentation((0.4, 0.6), 0.0)(x, key), x)
  half = np.asarray(_pairwise._augmentation((0.4, 0.6), 0.5)(x, key))
  cropped = np.array([not np.array_equal(half[i], x[i]) for i in range(40)])
  assert 8 <= cropped.sum() <= 32
  np.testing.assert_array_equal(half[cropped], np.asarray(want)[cropped])
  for bad in ((0.0, 0.5), (0.6, 0.4), "wide"):
    with pytest.raises(ValueError, match="crop_augment"):
      jhash.methods.dch(8, crop_augment=bad)
  flat = {"views": (np.zeros((8, 12), np.float32),), "labels": np.arange(8) % 2}
  with pytest.raises(ValueError, match="crop_augment crops images"):
    jhash.fit(jhash.methods.dch(8, crop_augment=(0.5, 1.0)), key, flat, progress=False)

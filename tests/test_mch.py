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
  np.testing.assert_array_equal(
    boxes, [[0, 0, 4, 5], [0, 5, 4, 5], [4, 0, 4, 5], [4, 5, 4, 5], [2, 2, 4, 5]]
  )
  np.testing.assert_array_equal(mch_parts.fixed_boxes(7, 7, 0.3)[4], [2, 2, 2, 2])


def test_crops_cut_the_right_pixels():
  image = jnp.arange(8 * 10 * 2, dtype=jnp.float32).reshape(8, 10, 2)
  for top, left, h, w in mch_parts.fixed_boxes(8, 10, 0.5):
    want = np.asarray(image)[top : top + h, left : left + w]
    cut = mch_parts.fixed_crop(image, top, left, (int(h), int(w)), (int(h), int(w)))
    np.testing.assert_array_equal(cut, want)
    box = jnp.asarray([top, left, h, w], jnp.float32)
    np.testing.assert_allclose(mch_parts.crop_resize(image, box, (int(h), int(w))), want, atol=1e-4)


def test_five_crops_resize_each_crop_to_the_image():
  rng = np.random.default_rng(0)
  images = rng.uniform(size=(3, 8, 10, 1)).astype(np.float32)
  crops = np.asarray(mch_parts.five_crops(images, 0.5))
  assert crops.shape == (3, 5, 8, 10, 1)
  for i in range(3):
    for c, (top, left, h, w) in enumerate(mch_parts.fixed_boxes(8, 10, 0.5)):
      # Cut as training crops are (one function), and away from the border the same as
      # resizing the cut pixels.
      box = jnp.asarray([top, left, h, w], jnp.float32)
      cut = mch_parts.crop_resize(images[i], box, (8, 10))
      np.testing.assert_allclose(crops[i, c], cut, rtol=0, atol=1e-6)
      want = jax.image.resize(images[i, top : top + h, left : left + w], (8, 10, 1), "linear")
      np.testing.assert_allclose(crops[i, c, 1:-1, 1:-1], want[1:-1, 1:-1], atol=1e-5)
  np.testing.assert_array_equal(
    mch_parts.five_crops(images, 1.0), np.repeat(images[:, None], 5, axis=1)
  )


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


def test_crop_resize_scales_each_side_by_its_own_factor():
  # An affine image f(y, x) = y + 10 x, which linear resampling reproduces exactly away
  # from the image's border: output pixel (i, j) samples the box at
  # y = top + (i + 1/2) h / out_h - 1/2 and x = left + (j + 1/2) w / out_w - 1/2.
  yy, xx = np.meshgrid(np.arange(12.0), np.arange(16.0), indexing="ij")
  image = jnp.asarray((yy + 10 * xx)[..., None], jnp.float32)
  top, left, h, w = 3.0, 4.0, 4.0, 2.0
  out = np.asarray(mch_parts.crop_resize(image, jnp.asarray([top, left, h, w]), (4, 8)))
  i, j = np.meshgrid(np.arange(4), np.arange(8), indexing="ij")
  want = (top + (i + 0.5) * h / 4 - 0.5) + 10 * (left + (j + 0.5) * w / 8 - 0.5)
  np.testing.assert_allclose(out[..., 0], want, atol=1e-4)


def test_random_boxes_keep_the_aspect_and_draw_three_independent_uniforms():
  boxes = np.asarray(mch_parts.random_boxes(jax.random.key(0), 500, 20, 40, (0.2, 0.8)))
  top, left, h, w = boxes.T
  ratio = h / 20
  np.testing.assert_allclose(w / 40, ratio, rtol=1e-6)  # one ratio for both sides
  # The ratio, and the position over the places the box fits: each uniform, independent.
  draws = np.stack([(ratio - 0.2) / 0.6, top / (20 - h), left / (40 - w)])
  assert draws.min() >= 0 and draws.max() <= 1
  np.testing.assert_allclose(draws.mean(axis=1), 0.5, atol=0.05)
  correlation = np.corrcoef(draws)[np.triu_indices(3, 1)]
  assert np.all(np.abs(correlation) < 0.15), correlation


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
  w[0] = 0.0  # no counted pair: reward 0
  table = rng.normal(size=(2, k + 1)).astype(np.float32)
  got = losses.keep_rewards(
    jnp.asarray(codes),
    jnp.asarray(crops),
    jnp.asarray(others),
    jnp.asarray(sim),
    jnp.asarray(w),
    jnp.asarray(table),
  )
  want = np.zeros(b)
  d, dc = _hamming(codes, others), _hamming(crops, others)
  for i in range(b):
    total = 0.0
    for j in range(m):
      s = int(sim[i, j])
      total += w[i, j] * (table[s, d[i, j]] - table[s, min(d[i, j], dc[i, j])])
    want[i] = total / w[i].sum() if w[i].sum() > 0 else 0.0
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _balanced_numpy(s, counted):
  """HashNet's weights: each kind of counted pair weighs half of their number in all."""
  p, p1 = counted.sum(), (counted & (s == 1)).sum()
  if p1 == 0 or p1 == p:
    return counted.astype(np.float64)
  return np.where(counted, np.where(s == 1, p / (2 * p1), p / (2 * (p - p1))), 0.0)


def _rewards_numpy(codes, crops, labels, index, memory, table):
  """Keep rewards against the batch's other items and the memory's filled rows other than
  the item's own, pair by pair (``memory``: (codes, labels, filled) or None)."""
  b = len(codes)
  m_codes, m_labels, filled = (
    memory
    if memory is not None
    else (np.zeros((0, codes.shape[1])), np.zeros(0, labels.dtype), np.zeros(0, bool))
  )
  others = np.concatenate([codes, m_codes])
  s = (labels[:, None] == np.concatenate([labels, m_labels])[None, :]).astype(int)
  counted = np.zeros(s.shape, bool)
  for i in range(b):
    for j in range(b):
      counted[i, j] = j != i
    for r in range(len(m_codes)):
      counted[i, b + r] = filled[r] and r != index[i]
  w = _balanced_numpy(s, counted)
  d, dc = _hamming(codes, others), _hamming(crops, others)
  rewards = np.zeros(b)
  for i in range(b):
    fall = [
      table[s[i, j], d[i, j]] - table[s[i, j], min(d[i, j], dc[i, j])] for j in range(len(others))
    ]
    rewards[i] = np.dot(w[i], fall) / w[i].sum()
  return rewards


def test_minibatch_rewards_count_the_batch_and_the_memory_but_not_the_item_itself():
  from jhash.methods import _memory

  rng = np.random.default_rng(2)
  b, n, k = 5, 8, 6
  codes, crops = rng.choice([-1.0, 1.0], size=(2, b, k))
  labels = rng.integers(0, 2, b).astype(np.int32)
  index = np.asarray([5, 0, 3, 6, 1])
  m_codes = rng.choice([-1.0, 1.0], size=(n, k))
  m_codes[index[:3]] = codes[:3]  # items seen before keep their codes
  m_labels = rng.integers(0, 2, n).astype(np.int32)
  m_labels[index] = labels
  filled = np.asarray([True, True, False, True, False, True, True, True])
  table = rng.normal(size=(2, k + 1)).astype(np.float32)
  memory = _memory.Memory(*(jnp.asarray(a) for a in (m_codes, m_labels, filled)))
  rewards = jax.jit(mch_parts.minibatch_rewards)
  args = (
    jnp.asarray(codes, jnp.float32),
    jnp.asarray(crops, jnp.float32),
    jnp.asarray(labels),
    jnp.asarray(index, jnp.int32),
  )
  np.testing.assert_allclose(
    rewards(*args, memory, jnp.asarray(table)),
    _rewards_numpy(codes, crops, labels, index, (m_codes, m_labels, filled), table),
    rtol=1e-5,
    atol=1e-6,
  )
  np.testing.assert_allclose(
    rewards(*args, None, jnp.asarray(table)),
    _rewards_numpy(codes, crops, labels, index, None, table),
    rtol=1e-5,
    atol=1e-6,
  )


def test_code_loss_table_is_the_loss_on_codes_at_each_distance():
  k = 6
  table = np.asarray(losses.code_loss_table(losses.pairwise_likelihood, k))
  for s in (0, 1):
    for d in range(k + 1):
      other = np.ones(k)
      other[:d] = -1
      want = losses.pairwise_likelihood(
        jnp.ones((1, k)), jnp.asarray(other[None]), jnp.full((1, 1), float(s)), jnp.ones((1, 1))
      )
      np.testing.assert_allclose(table[s, d], want, rtol=1e-6)
  # Similar pairs lose more the farther apart, dissimilar ones less.
  assert np.all(np.diff(table[1]) > 0) and np.all(np.diff(table[0]) < 0)


def test_code_loss_table_reads_both_codes_through_the_activation():
  k = 5
  loss = lambda u, v, s, w: losses.pairwise_likelihood(u, v, s, w, quantization=0.0)
  table = np.asarray(losses.code_loss_table(loss, k, lambda c: 0.4 * c + 0.1))
  # theta = 0.5 <a(1), a(c_d)> with a(+1) = 0.5, a(-1) = -0.3: d bits of 0.5 * -0.3.
  d = np.arange(k + 1)
  theta = 0.5 * ((k - d) * 0.5 * 0.5 + d * 0.5 * -0.3)
  for s in (0, 1):
    np.testing.assert_allclose(table[s], np.log1p(np.exp(theta)) - s * theta, rtol=1e-5)


def _reference_table(name: str, k: int, ratio: float) -> np.ndarray:
  """[2, K + 1]: each base's trained pair loss, by hand, on codes at Hamming distance d."""
  d = np.arange(k + 1, dtype=np.float64)
  inner = k - 2 * d  # b_i . b_j
  s = np.array([0.0, 1.0])[:, None]
  if name == "ksh":  # ((1/K) <h, h'> - S~)^2, h = b
    return (inner / k - (2 * s - 1)) ** 2
  if name == "hashnet":  # log(1 + exp(a <h, h'>)) - s a <h, h'>, a = 10 / K, h = b
    theta = 10.0 / k * inner
    return np.log1p(np.exp(theta)) - s * theta
  if name == "dch":  # Cauchy cross-entropy at gamma = 20 (eps 1e-6 at d = 0); h on a vertex
    return s * np.log1p(d / 20) + (1 - s) * np.log1p(20 / (d + 1e-6))
  if name == "mmhh":  # t-distribution cross-entropy, gamma = 10, the authors' margin factors
    inside = d <= 2
    similar = np.where(inside, 0.5, 1.0) * (np.log(2) + np.log1p(d / 10))
    dissimilar = np.where(inside, 0.8, 1.0) * np.log1p(5 / (d + 5))
    return np.stack([dissimilar, similar])
  if name == "adsh":  # (b_i . b_j - K S~)^2 / K with ADSH's trained S~ in {1, -r}
    return (inner - k * np.where(s > 0, 1.0, -ratio)) ** 2 / k
  raise ValueError(name)


@pytest.mark.parametrize("name", ["ksh", "hashnet", "dch", "mmhh", "adsh"])
def test_each_base_reward_table_is_its_trained_loss_on_binary_codes(name):
  """MCH's reward reads ``extras.code_loss``: the loss each base trains with, evaluated on
  its binary codes (KSH's relaxation and the tanh of HashNet, DCH and MMHH saturated, ADSH
  with the targets 1 and -r it trains with), not on codes squashed to +-0.46 or +-0.76."""
  rng = np.random.default_rng(0)
  k = 8
  x = rng.normal(size=(16, 4)).astype(np.float32)
  labels = np.arange(16) % 4  # 64 similar pairs of 256: r = 64 / 192
  method = jhash.methods.REGISTRY[name](k)
  state = jhash.init(method, jax.random.key(0), {"views": (x,), "labels": labels})
  table = np.asarray(method.extras.code_loss(state), np.float64)
  want = _reference_table(name, k, ratio=64 / 192)
  assert table.shape == (2, k + 1)
  # Terms on single codes (quantisation) are the same in every entry: compare differences.
  np.testing.assert_allclose(table - table[:, -1:], want - want[:, -1:], rtol=1e-4, atol=1e-5)
  # Similar pairs lose more the farther apart, for every base.
  assert np.all(np.diff(table[1]) >= 0) and table[1, -1] > table[1, 0]


def test_mmhh_reward_table_favours_dissimilar_items_inside_the_ball_as_its_loss_does():
  """MMHH's authors weight dissimilar pairs inside the Hamming ball by 0.8 and those outside
  by 1 (``--margin_params 0.5:0.8:1.0:1.0:2.0``), so its trained loss on codes is lower for
  a dissimilar pair at distance 2 than at 3: the reward of a crop that pulls a dissimilar
  item into the ball is positive. With equal factors the table is monotone."""
  rng = np.random.default_rng(0)
  batch = {"views": (rng.normal(size=(8, 4)).astype(np.float32),), "labels": np.arange(8) % 2}
  table = np.asarray(
    jhash.methods.mmhh(32).extras.code_loss(
      jhash.init(jhash.methods.mmhh(32), jax.random.key(0), batch)
    )
  )
  assert table[0, 2] < table[0, 3]
  even = jhash.methods.mmhh(32, dissimilar_inside=1.0)
  table = np.asarray(even.extras.code_loss(jhash.init(even, jax.random.key(0), batch)))
  assert np.all(np.diff(table[0]) < 0)


# -------------------------------------------------------------------------- REINFORCE


def test_reinforce_gradient_is_the_exact_expected_gradient():
  """Two states, tabular logits: averaging the estimator's gradient over every joint
  action, weighted by its probability, gives minus the gradient of the expected reward,
  whatever the baseline."""
  theta = jnp.asarray([[0.3, -0.2], [-0.5, 0.4]])  # logits [state, action]
  reward = jnp.asarray([1.5, -0.7])  # keep rewards; discard 0

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


def test_reinforce_loss_takes_no_gradient_through_the_advantages():
  theta = jnp.asarray([[0.3, -0.2], [-0.5, 0.4], [0.1, 0.7]])
  actions = jnp.asarray([1, 0, 1])
  # Advantages that are a function of the logits: still weights, not differentiated.
  grad = jax.grad(lambda t: losses.reinforce_loss(t, actions, 2.0 * t[:, 1] - 0.5))(theta)
  advantages = 2.0 * np.asarray(theta)[:, 1] - 0.5
  # d(-mean_i A_i log pi(a_i | h_i)) / d theta_i = -A_i (onehot(a_i) - pi_i) / b.
  onehot = np.eye(2)[np.asarray(actions)]
  want = -advantages[:, None] * (onehot - np.asarray(jax.nn.softmax(theta))) / 3
  np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-7)


def test_agent_state_is_features_then_codes_of_the_image_and_of_the_crop():
  whole = models.HashOutputs(jnp.asarray([[0.5, -2.0, 0.0]]), jnp.asarray([[1.0, 2.0]]))
  crop = models.HashOutputs(jnp.asarray([[-0.1, 3.0, -4.0]]), jnp.asarray([[3.0, 4.0]]))
  h, b, c = mch_parts.agent_inputs(whole, crop)
  np.testing.assert_array_equal(h, [[1, 2, 3, 4, 1, -1, 1, -1, 1, -1]])
  np.testing.assert_array_equal(b, [[1, -1, 1]])  # sign(0) = +1
  np.testing.assert_array_equal(c, [[-1, 1, -1]])


def test_policy_step_is_one_reinforce_step_with_the_running_baseline():
  rng = np.random.default_rng(3)
  net = models.model(models.PolicyMLP((16, 16, 8, 8)))
  opt = optax.sgd(0.1)
  states = jnp.asarray(rng.normal(size=(16, 6)), jnp.float32)
  rewards = jnp.asarray(rng.normal(size=16), jnp.float32)
  coder = mch_parts.policy_coder(net, opt)
  policy = jax.jit(lambda k: coder.init(k, {"views": (states,)}))(jax.random.key(0))
  agent = mch_parts.AgentState(policy, jnp.float32(0.3), jnp.float32(2.0))
  key = jax.random.key(7)
  new, metrics = jax.jit(lambda a: mch_parts.policy_step(coder, a, states, rewards, key, 0.9))(
    agent
  )
  # Independently: actions drawn with the step's key from the training-mode logits; the
  # reward of the action taken (0 for discard); advantages (R - m) / s with the running
  # mean and scale before the step; one SGD step on -mean_i A_i log pi(a_i | h_i).
  logits = jax.jit(lambda v: net.apply(v, states, train=True)[0])(
    training.variables(agent.policy.train)
  )
  actions = np.asarray(jax.random.categorical(key, logits))
  assert 0 < actions.sum() < 16
  taken = np.asarray(rewards) * actions
  advantages = (taken - 0.3) / 2.0

  def loss(params, advantages, actions):
    out, _ = net.apply(
      {"params": params, "batch_stats": agent.policy.train.batch_stats}, states, train=True
    )
    return -jnp.mean(advantages * jax.nn.log_softmax(out)[jnp.arange(16), actions])

  value, grads = jax.jit(jax.value_and_grad(loss))(agent.policy.train.params, advantages, actions)
  np.testing.assert_allclose(metrics["agent_loss"], value, rtol=1e-5)
  jax.tree.map(
    lambda a, p, g: np.testing.assert_allclose(a, p - 0.1 * g, rtol=1e-5, atol=1e-6),
    new.policy.train.params,
    agent.policy.train.params,
    grads,
  )
  np.testing.assert_allclose(metrics["reward"], taken.mean(), rtol=1e-5)
  np.testing.assert_allclose(metrics["kept"], actions.mean())
  np.testing.assert_allclose(new.reward_mean, 0.9 * 0.3 + 0.1 * taken.mean(), rtol=1e-5)
  spread = np.sqrt(np.mean((taken - 0.3) ** 2))  # about the baseline it used
  np.testing.assert_allclose(new.reward_scale, 0.9 * 2.0 + 0.1 * spread, rtol=1e-5)


def test_dedupe_mask_drops_only_repeats_of_kept_codes():
  a, b, c = [1, 1], [1, -1], [-1, -1]
  codes = jnp.asarray([[a, b, b, a, c, b], [a, a, c, c, b, c]], jnp.int8)
  keep = jnp.asarray([[1, 0, 1, 1, 1, 1], [1, 1, 0, 1, 1, 1]], bool)
  # Row 0: b at 2 is kept (the b before it was not), a at 3 and b at 5 repeat kept codes.
  # Row 1: a at 1 repeats the image's code; c at 3 is kept (the c before it was not).
  np.testing.assert_array_equal(
    mch_parts.dedupe_mask(codes, keep), [[1, 0, 1, 0, 1, 0], [1, 0, 0, 1, 1, 0]]
  )


def _agent(dim, seed=0):
  net = models.model(models.PolicyMLP((32, 32, 16, 16)))
  opt = optax.adam(3e-3)
  coder = mch_parts.policy_coder(net, opt)
  state = coder.init(jax.random.key(seed), {"views": (jnp.zeros((2, dim)),)})
  return coder, mch_parts.AgentState(state, jnp.zeros(()), jnp.ones(()))


def test_policy_learns_to_keep_a_rewarded_crop_and_drop_an_unrewarded_one():
  rng = np.random.default_rng(0)
  good, bad = rng.normal(size=(2, 10)).astype(np.float32)
  coder, agent = _agent(10)
  states = jnp.asarray(np.stack([good, bad] * 16))
  noise = jax.random.normal(jax.random.key(5), (400,) + states.shape) * 0.1
  rewards = jnp.asarray([1.0, -1.0] * 16)

  def step(a, i):
    return mch_parts.policy_step(
      coder, a, states + noise[i], rewards, jax.random.fold_in(jax.random.key(1), i), 0.9
    )

  before = mch_parts.keep_probability(coder, agent.policy, states[:2])
  agent, metrics = jax.jit(lambda a: jax.lax.scan(step, a, jnp.arange(400)))(agent)
  metrics = jax.tree.map(lambda m: m[-20:].mean(), metrics)
  after = np.asarray(mch_parts.keep_probability(coder, agent.policy, states[:2]))
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
  np.testing.assert_array_equal(
    state.memory.outputs, jhash.encode(base, state.base, tiny).astype(np.float32)
  )


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
  np.testing.assert_array_equal(mask, _expected_mask(np.asarray(codes), keep))


def _expected_mask(codes, keep):
  """The whole image's code, then each crop whose keep is True and whose code is not one
  already kept for the item."""
  mask = np.zeros(codes.shape[:2], bool)
  for i in range(codes.shape[0]):
    seen = [codes[i, 0]]
    mask[i, 0] = True
    for j in range(codes.shape[1] - 1):
      mask[i, j + 1] = keep[i, j] and not any((codes[i, j + 1] == s).all() for s in seen)
      if mask[i, j + 1]:
        seen.append(codes[i, j + 1])
  return mask


def test_xi_is_the_keep_threshold(fitted, tiny):
  base, method, state, _ = fitted
  probability = np.asarray(method.extras.keep_probabilities(state, tiny))
  xi = float(np.quantile(probability, 0.2))
  codes, mask = jhash.encode_multi(jhash.methods.mch(base, xi=xi), state, tiny)
  expected = _expected_mask(np.asarray(codes), probability > xi)
  # The threshold matters here: the default xi = 0.5 would keep other crops.
  assert not np.array_equal(expected, _expected_mask(np.asarray(codes), probability > 0.5))
  np.testing.assert_array_equal(mask, expected)


def test_sigma_one_is_the_base_model_exactly(fitted, tiny):
  base, method, state, _ = fitted
  whole = jhash.methods.mch(base, sigma=1.0, xi=0.01)  # keeps every crop it may
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
    batch = {
      "views": (tiny["views"][0][index],),
      "labels": tiny["labels"][index],
      "index": jnp.asarray(index, jnp.int32),
    }
    state, _ = step(state, batch, jax.random.key(i))
  assert np.isfinite(float(state.agent.reward_scale))


def test_agent_step_rewards_the_crops_it_cuts_and_acts_with_its_own_key(fitted, tiny):
  base, method, state, _ = fitted
  index = np.arange(32) + 8
  batch = {
    "views": (tiny["views"][0][index],),
    "labels": tiny["labels"][index],
    "index": jnp.asarray(index, jnp.int32),
  }
  key = jax.random.key(4)
  _, metrics = jax.jit(method.phases[-1].update)(state, batch, key)
  # Independently: one crop of each image, side ratio in sigma +- 0.2, from the key's first
  # half; codes of image and crop by the frozen base; rewards against the batch and the
  # (full) memory; actions drawn from the policy's training-mode logits with the second half.
  k_crop, k_act = jax.random.split(key)
  coder = base.extras.coder
  x = coder.read(batch)
  crops, _ = mch_parts.random_crops(k_crop, x, (0.3, 0.7))
  outputs = jax.jit(coder.outputs)
  whole, crop = outputs(state.base.coder, x), outputs(state.base.coder, crops)
  codes, crop_codes = (np.where(o.logits >= 0, 1.0, -1.0) for o in (whole, crop))
  memory = (
    np.asarray(state.memory.outputs),
    np.asarray(state.memory.labels),
    np.asarray(state.memory.filled),
  )
  rewards = _rewards_numpy(
    codes, crop_codes, batch["labels"], index, memory, np.asarray(base.extras.code_loss(state.base))
  )
  h = jnp.concatenate([whole.features, crop.features, codes, crop_codes], axis=1)
  policy = models.model(models.PolicyMLP((512, 256, 128, 64)))
  logits = jax.jit(lambda v, h: policy.apply(v, h, train=True)[0])(
    training.variables(state.agent.policy.train), h
  )
  actions = np.asarray(jax.random.categorical(k_act, logits))
  assert 0 < actions.sum() < 32 and np.ptp(rewards) > 0
  np.testing.assert_allclose(metrics["kept"], actions.mean())
  np.testing.assert_allclose(metrics["reward"], np.mean(rewards * actions), rtol=1e-4, atol=1e-6)


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
    jhash.fit(
      jhash.methods.mch(jhash.methods.dch(8, batch_size=32, num_epochs=1)),
      jax.random.key(0),
      flat,
      progress=False,
    )


def test_a_crop_of_one_pixel_is_not_smaller_than_a_pixel():
  from jhash.methods import _crops

  assert _crops.check_ratio(0.25, "sigma", 4) == 0.25  # one pixel of four
  with pytest.raises(ValueError, match="smaller than a pixel"):
    _crops.check_ratio(0.24, "sigma", 4)


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


# -------------------------------------------------------------------------- controls


def test_kept_codes_put_the_whole_code_first_and_keep_a_repeat_once():
  whole = np.array([[1, 1, -1]], np.int8)
  extra = np.array([[[1, 1, -1], [-1, 1, 1], [-1, 1, 1]]], np.int8)  # a repeat of whole, twice
  codes, mask = mch_parts.kept_codes(whole, extra, np.array([[True, True, True]]))
  np.testing.assert_array_equal(codes[0, 0], whole[0])
  np.testing.assert_array_equal(mask, [[True, False, True, False]])
  _, mask = mch_parts.kept_codes(whole, extra, np.array([[False, False, True]]))
  np.testing.assert_array_equal(mask, [[True, False, False, True]])


def test_random_keeping_at_the_matching_rate_keeps_as_many_codes_as_mch():
  mask = np.zeros((4000, 6), bool)
  mask[:, 0] = True
  mask[:1000, 1:4] = True  # 1.75 codes per item: 0.15 of the five crops
  rate = float(mch_parts.matching_rate(mask))
  assert rate == pytest.approx(0.15)
  keep = np.asarray(mch_parts.keep_at_random(jax.random.key(0), (4000, 5), rate))
  assert 1 + keep.sum(axis=1).mean() == pytest.approx(1.75, abs=0.03)


def test_the_oracle_keeps_exactly_the_crops_of_positive_reward():
  """One item of code b; crop 0 coded as its similar neighbour (reward > 0: the neighbour is
  found nearer), crop 1 as its dissimilar neighbour (reward < 0), crop 2 as b (reward 0)."""
  k = 8
  b = np.ones((1, k), np.float32)
  near_similar = b.copy()
  near_similar[0, :6] = -1  # distance 6 from b
  near_dissimilar = b.copy()
  near_dissimilar[0, 2:8] = -1  # distance 6 from b
  others = np.concatenate([near_similar, near_dissimilar])
  crops = np.stack([near_similar, near_dissimilar, b], axis=1)  # [1, 3, K]
  similarity = np.array([[1.0, 0.0]], np.float32)
  table = losses.code_loss_table(losses.pairwise_likelihood, k)
  keep = np.asarray(mch_parts.oracle_keep(b, crops, others, similarity, table))
  np.testing.assert_array_equal(keep, [[True, False, False]])
  # A NumPy table works as a JAX one (was: TracerArrayConversionError); a table of
  # another code length is named (was: indices clamped, a plausible mask).
  again = mch_parts.oracle_keep(b, crops, others, similarity, np.asarray(table))
  np.testing.assert_array_equal(again, keep)
  with pytest.raises(ValueError, match=r"table must be the loss on codes \[2, K \+ 1\] = \[2, 9\]"):
    mch_parts.oracle_keep(b, crops, others, similarity, np.asarray(table)[:, :3])
  weights = losses.balanced_pair_weights(similarity)
  for c, want in enumerate((1, -1, 0)):
    reward = float(losses.keep_rewards(b, crops[:, c], others, similarity, weights, table)[0])
    assert np.sign(round(reward, 6)) == want

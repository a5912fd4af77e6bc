"""Bad input, fifth round, methods: MCH's parts and extras (``mch_parts``, the crops,
``jhash.losses.keep_rewards``), CDH's parts and supervision (``cdh_parts``, ``cdh``) and the
classifier. Each case crashed the process, gave a silently wrong value or a raw Python /
jax error; each is now a clear error naming the argument, or works as documented."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
from jhash import losses
from jhash.methods import cdh_parts
from jhash.methods import mch_parts

# ------------------------------------------------------------------------------ MCH parts


def test_keep_at_random_refuses_a_mask_past_memory():
  # Aborted the process (an XLA check failure) before.
  with pytest.raises(ValueError, match=r"keep_at_random of shape .* memory"):
    mch_parts.keep_at_random(jax.random.key(0), (10**9, 10**9), 0.5)


def _reward_inputs(b=3, m=5, k=4):
  rng = np.random.default_rng(0)
  sign = lambda *s: np.where(rng.random(s) < 0.5, -1.0, 1.0).astype(np.float32)
  similarity = (rng.random((b, m)) < 0.5).astype(np.float32)
  table = rng.random((2, k + 1)).astype(np.float32)
  return sign(b, k), sign(b, k), sign(m, k), similarity, np.ones((b, m), np.float32), table


def test_keep_rewards_refuses_broadcasting_shapes():
  codes, crops, others, s, w, table = _reward_inputs()
  for similarity, weights in ((s[:1], w), (s, w[:1]), (s, w[:, :1]), (s[:, :1], w)):
    with pytest.raises(ValueError, match="do not fit together.*similarity"):
      losses.keep_rewards(codes, crops, others, similarity, weights, table)
  with pytest.raises(ValueError, match="do not fit together"):
    losses.keep_rewards(codes, crops[:2], others, s, w, table)


def test_keep_rewards_checks_values_where_concrete():
  codes, crops, others, s, w, table = _reward_inputs()
  with pytest.raises(ValueError, match="similarity must hold only 0 and 1"):
    losses.keep_rewards(codes, crops, others, 2 * s, w, table)
  with pytest.raises(ValueError, match="codes must hold codes as signs"):
    losses.keep_rewards((codes > 0).astype(np.float32), crops, others, s, w, table)
  with pytest.raises(ValueError, match="table must hold finite values"):
    losses.keep_rewards(codes, crops, others, s, w, table * np.nan)
  with pytest.raises(ValueError, match="table must be float"):
    losses.keep_rewards(codes, crops, others, s, w, [["a"] * 5] * 2)
  want = losses.keep_rewards(codes, crops, others, s, w, table)
  np.testing.assert_allclose(losses.keep_rewards(codes, crops, others, s, w, table.tolist()), want)
  np.testing.assert_allclose(jax.jit(losses.keep_rewards)(codes, crops, others, s, w, table), want)


def test_oracle_keep_refuses_a_non_finite_or_string_table():
  codes, crops, others, s, _, table = _reward_inputs()
  with pytest.raises(ValueError, match="table must hold finite values"):
    mch_parts.oracle_keep(codes, crops[:, None], others, s, table * np.nan)
  with pytest.raises(ValueError, match="table must be float"):
    mch_parts.oracle_keep(codes, crops[:, None], others, s, [["a"] * 5] * 2)
  want = mch_parts.oracle_keep(codes, crops[:, None], others, s, table)
  np.testing.assert_array_equal(
    mch_parts.oracle_keep(codes.tolist(), crops[:, None].tolist(), others, s, table.tolist()), want
  )


def test_kept_codes_and_keep_all_take_lists():
  codes, crops, *_ = _reward_inputs()
  keep = np.ones((3, 1), bool)
  got, mask = mch_parts.kept_codes(codes.tolist(), crops[:, None].tolist(), keep.tolist())
  want, want_mask = mch_parts.kept_codes(codes, crops[:, None], keep)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(mask, want_mask)
  assert mch_parts.keep_all([[0.1, 0.2]]).shape == (1, 2)


def test_crops_check_their_box_ratio_and_sizes():
  image = jnp.ones((8, 8, 1))
  with pytest.raises(ValueError, match=r"box must be \(top, left, height, width\)"):
    mch_parts.crop_resize(image, jnp.array([0.0, 0.0, 4.0]), (8, 8))
  with pytest.raises(ValueError, match="height and width > 0"):
    mch_parts.crop_resize(image, jnp.array([0.0, 0.0, -4.0, 4.0]), (8, 8))
  with pytest.raises(ValueError, match="image must be 3-D"):
    mch_parts.crop_resize(jnp.ones((8, 8)), jnp.array([0.0, 0.0, 4.0, 4.0]), (8, 8))
  images = jnp.ones((2, 8, 8, 1))
  for sigma in (2.0, 0.0, -1, np.nan, "0.5"):
    with pytest.raises(ValueError, match="sigma"):
      mch_parts.five_crops(images, sigma)
    with pytest.raises(ValueError, match="sigma"):
      mch_parts.fixed_boxes(8, 8, sigma)
  with pytest.raises(ValueError, match="images must be 4-D"):
    mch_parts.five_crops(jnp.ones((2, 8, 8)), 0.5)
  key = jax.random.key(0)
  for bad in ((1.5, 2.0), (0.6, 0.4), (-1, 0), 0.5):
    with pytest.raises(ValueError, match="ratio_range"):
      mch_parts.random_boxes(key, 3, 8, 8, bad)
  with pytest.raises(ValueError, match="num must be >= 0"):
    mch_parts.random_boxes(key, -1, 8, 8, (0.4, 0.6))
  with pytest.raises(ValueError, match="images must be 4-D"):
    mch_parts.random_crops(key, jnp.ones((2, 8, 8)), (0.4, 0.6))
  with pytest.raises(ValueError, match=r"top must be in \[0, 4\]"):
    mch_parts.fixed_crop(image, 100, 0, (4, 4), (4, 4))
  with pytest.raises(ValueError, match="size must fit in the image"):
    mch_parts.fixed_crop(image, 0, 0, (10, 10), (4, 4))
  assert mch_parts.random_boxes(key, 3, 8, 8, (0.4, 0.6)).shape == (3, 4)


def test_mch_refuses_a_string_sigma():
  base = jhash.methods.dch(8)
  with pytest.raises(ValueError, match="sigma must be a number"):
    jhash.methods.mch(base, sigma="0.5")


@pytest.fixture(scope="module")
def fitted():
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 2, 32).astype(np.int32)
  images = rng.uniform(size=(32, 28, 28)).astype(np.float32)  # 28 x 28: the small CNN
  batch = {"views": (images,), "labels": labels}
  base = jhash.methods.dch(8, batch_size=16, num_epochs=1)
  method = jhash.methods.mch(base, sigma=0.5, agent_epochs=1, agent_batch_size=16)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  return method, state, batch


@pytest.mark.parametrize("extra", ["crop_codes", "crop_states", "keep_probabilities"])
def test_mch_extras_check_state_and_batch_as_encode_multi(fitted, extra):
  method, state, batch = fitted
  fn = getattr(method.extras, extra)
  images = batch["views"][0]
  with pytest.raises(ValueError, match="finite"):
    fn(state, {"views": (images * np.nan,)})
  with pytest.raises(ValueError, match="dtype"):
    fn(state, {"views": ((images * 255).astype(np.uint8),)})
  for bad in (None, state.base):
    with pytest.raises(TypeError, match="MCHState"):
      fn(bad, {"views": (images[:4],)})
  empty = fn(state, {"views": (images[:0],)})
  full = fn(state, {"views": (images[:2],)})
  for e, f in zip(jax.tree.leaves(empty), jax.tree.leaves(full)):
    assert e.shape == (0,) + f.shape[1:] and e.dtype == f.dtype


def test_encode_multi_names_a_base_state(fitted):
  method, state, batch = fitted
  with pytest.raises(TypeError, match="MCHState"):
    jhash.encode_multi(method, state.base, {"views": (batch["views"][0][:4],)})


# ------------------------------------------------------------------------------ CDH parts


def test_supervision_from_pairs_refuses_a_matrix_past_int32_or_memory():
  # Aborted the process (absl "overflow in static extent product") before.
  with pytest.raises(ValueError, match="num_items must fit in int32"):
    cdh_parts.supervision_from_pairs([0], [1], [1], 10**12)
  with pytest.raises(ValueError, match="memory"):
    cdh_parts.supervision_from_pairs([0], [1], [1], 2**31 - 1)


def _cdh_data(n=40):
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 3, n)
  a = rng.normal(size=(n, 5)).astype(np.float32)
  b = rng.normal(size=(n, 3)).astype(np.float32)
  codes = jnp.asarray(np.where(rng.random((n, 4)) < 0.5, -1, 1), jnp.int8)
  return labels, a, b, codes


def test_cdh_refuses_a_bool_pair_matrix():
  # A bool False read as 0, "unknown": every dissimilar pair was dropped without a word.
  labels, a, b, _ = _cdh_data()
  similar = labels[:, None] == labels[None]
  method = jhash.methods.cdh(8, supervision="pairs", num_sweeps=1)
  with pytest.raises(ValueError, match=r"not bool.*np.where\(Y, 1, -1\)"):
    jhash.init(method, jax.random.key(0), {"views": (a, b), "Y": similar})
  with pytest.raises(ValueError, match="values must hold -1.*not bool"):
    cdh_parts.supervision_from_pairs([0], [1], [True], 4)
  with pytest.raises(ValueError, match="not bool"):
    cdh_parts.supervision_from_matrix(similar)
  jhash.init(method, jax.random.key(0), {"views": (a, b), "Y": np.where(similar, 1, -1)})


def test_cdh_parts_refuse_unknown_merits_and_shapes_that_do_not_fit():
  labels, a, b, codes = _cdh_data()
  sup = cdh_parts.supervision_from_labels(labels)
  with pytest.raises(ValueError, match="kind must be one of"):
    cdh_parts.semantic_term(codes, sup, "Linear")
  other = cdh_parts.supervision_from_labels(labels[:30])
  with pytest.raises(ValueError, match="sup must be the supervision of the same 40 items"):
    cdh_parts.semantic_term(codes, other, "linear")
  with pytest.raises(ValueError, match="block_rows must be >= 1"):
    cdh_parts.semantic_term(codes, sup, "linear", 0)
  z = jnp.zeros((40, 4))
  uniforms = jax.random.uniform(jax.random.key(0), (4, 3))
  with pytest.raises(ValueError, match=r"z must be \[n, K\] = \[40, 4\]"):
    cdh_parts.bstep_sweep(codes, z[:, :3], sup, 0.1, uniforms)
  with pytest.raises(ValueError, match="codes must hold only -1 and \\+1"):
    cdh_parts.bstep_sweep((codes > 0).astype(jnp.int8), z, sup, 0.1, uniforms)
  with pytest.raises(ValueError, match="gamma must be a finite number >= 0"):
    cdh_parts.bstep_sweep(codes, z, sup, -1.0, uniforms)
  with pytest.raises(ValueError, match="sup must be the supervision"):
    cdh_parts.bstep_sweep(codes, z, other, 0.1, uniforms)
  with pytest.raises(ValueError, match="block_rows must be >= 1"):
    cdh_parts.bstep_sweep(codes, z, sup, 0.1, uniforms, block_rows=0)
  got = jax.jit(cdh_parts.bstep_sweep)(codes, z, sup, 0.1, uniforms)[0]
  np.testing.assert_array_equal(got, cdh_parts.bstep_sweep(codes, z, sup, 0.1, uniforms)[0])


def test_cdh_generative_parts_check_eps_codes_and_views():
  _, a, b, codes = _cdh_data()
  with pytest.raises(ValueError, match=r"eps must be in \(0, 0.5\)"):
    cdh_parts.log_prior_odds(codes, 0.7)
  with pytest.raises(ValueError, match="codes must hold only -1 and \\+1"):
    cdh_parts.log_prior_odds((codes > 0).astype(jnp.int8), 1e-3)
  weights = [jnp.zeros((4, 6)), jnp.zeros((4, 4))]
  with pytest.raises(ValueError, match=r"one entry per trained view \(2 weights\); got 1"):
    cdh_parts.generative_terms(weights, (a,))
  with pytest.raises(ValueError, match="num_views must be >= 1"):
    cdh_parts.generative_term(codes, jnp.zeros((40, 4)), 0.1, 0)
  with pytest.raises(ValueError, match=r"views\[0\] must have 5 features"):
    cdh_parts.generative_encode(weights, jnp.zeros(4), (b, a))
  with pytest.raises(ValueError, match=r"prior_odds must be \[K\] = \[4\]"):
    cdh_parts.generative_encode(weights, jnp.zeros(3), (a, b))
  assert cdh_parts.generative_encode(weights, jnp.zeros(4), (a, None)).shape == (40, 4)


@pytest.mark.parametrize("eps", ["0.1", None, [0.1], np.array([0.1])])
def test_cdh_prior_eps_must_be_a_real_scalar(eps):
  with pytest.raises(ValueError, match="prior_eps must be a real scalar"):
    jhash.methods.cdh(8, prior_eps=eps)


# ------------------------------------------------------------------------------ classifier


def test_classifier_refuses_num_classes_past_int32():
  with pytest.raises(ValueError, match="num_classes must fit in int32"):
    jhash.methods.classifier(2**36)

"""Bad input, round 12: NDCG's gains, bfloat16 in the chunk kernels, the sharded mAP's
sizes, the unchecked searches' static facts, options given as arrays, packed words of
other integer types, subnormal weights and the index's small helpers. Each case names
what it did before."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jhash import codes
from jhash import index
from jhash import metrics
from jhash import search


def _signs(rng, n, k=16):
  return codes.sign(rng.normal(size=(n, k)))


def test_ndcg_of_many_label_columns_equals_its_class_id_form(rng):
  q, db = _signs(rng, 5), _signs(rng, 40)
  ql, dl = rng.integers(0, 100, 5), rng.integers(0, 100, 40)
  dl[:20] = np.repeat(ql, 4)
  one_hot = np.eye(100, dtype=bool)
  for ties in ("aware", "index"):  # was: 0.0 from 97 columns on (2**128 in a gain table)
    want = metrics.ndcg_at_k(q, db, ql, dl, 10, ties=ties)
    got = metrics.ndcg_at_k(q, db, one_hot[ql], one_hot[dl], 10, ties=ties)
    assert got == pytest.approx(want, rel=1e-6) and want > 0
  many = np.ones((5, 101), bool)
  with pytest.raises(ValueError, match=r"gain='exp' takes grades .* up to 100"):
    metrics.ndcg_at_k(q, db, many, np.ones((40, 101), bool), 10)
  with pytest.raises(ValueError, match=r"grades must be <= 100 with gain='exp'"):
    metrics.ndcg(np.array([[0, 1, 2, 3]]), np.full((1, 4), 127), k=3)  # was: nan, defined


def test_bfloat16_values_get_the_float32_checks():
  d = np.array([[0, 2, 1, 2, 3]], np.int32)
  relevant = np.array([[1, 0, 1, 0, 1]], bool)
  bf = jnp.bfloat16
  with pytest.raises(ValueError, match=r"relevance must be bool \(or 0 and 1\)"):
    metrics.average_precision(d, jnp.asarray(relevant * 0.5, bf))  # was: accepted
  with pytest.raises(ValueError, match=r"relevance must be bool \(or 0 and 1\)"):
    metrics.hits_at_k(d, jnp.asarray(relevant * 0.3, bf), (2,))  # was: 0.3 counted relevant
  with pytest.raises(ValueError, match=r"relevance must not be NaN"):
    metrics.average_precision(d, jnp.asarray(np.where(relevant, np.nan, 0), bf))
  with pytest.raises(ValueError, match=r"distances must not be NaN"):
    metrics.ranked_positions(jnp.asarray([[np.nan, 1, 0]], bf), 3)  # was: [[2, 1, 0]]
  np.testing.assert_array_equal(  # 0/1 bfloat16 relevance reads as bool
    metrics.average_precision(d, jnp.asarray(relevant, bf))[0],
    metrics.average_precision(d, relevant)[0],
  )


def test_the_sharded_map_refuses_an_empty_database_and_empty_codes(rng):
  mesh = jax.make_mesh((1,), ("db",))
  q, db = _signs(rng, 4), _signs(rng, 8)
  ql, dl = np.arange(4) % 2, np.arange(8) % 2
  with pytest.raises(ValueError, match=r"db_codes must hold at least one database item"):
    metrics.sharded_mean_average_precision(q, db[:0], ql, dl[:0], mesh=mesh)  # was: 0.0
  with pytest.raises(ValueError, match=r"must have a last axis of num_bits >= 1"):
    metrics.sharded_mean_average_precision(q[:, :0], db[:, :0], ql, dl, mesh=mesh)  # 0.439


def test_the_unchecked_searches_check_num_bits_and_dtypes(rng):
  qp, dp = codes.pack_bits(_signs(rng, 3, 40)), codes.pack_bits(_signs(rng, 7, 40))
  with pytest.raises(ValueError, match=r"num_bits must be an int in \[33, 64\]"):
    search.hamming_topk_unchecked(qp, dp, 4, 1, method="xor")  # was: indices past n
  with pytest.raises(ValueError, match=r"num_bits must be an int in \[33, 64\]"):
    search.sharded_hamming_topk_unchecked(qp, dp, 4, mesh=jax.make_mesh((1,), ("db",)), num_bits=1)
  with pytest.raises(ValueError, match=r"db_packed must be packed codes of dtype uint32"):
    search.hamming_topk_unchecked(qp, np.asarray(dp).astype(np.int32), 2)  # was: an FFI error
  multi = np.stack([np.asarray(dp)] * 2, axis=1)
  with pytest.raises(ValueError, match=r"db_mask must be boolean"):
    search.multi_code_topk_unchecked(qp, multi, np.ones((7, 2), np.int32), 2, 40)  # FFI error


def test_string_options_given_as_arrays_are_named(rng):
  q, db = _signs(rng, 4), _signs(rng, 8)
  ql, dl = np.arange(4) % 2, np.arange(8) % 2
  for option in ("ties", "normalizer", "no_relevant"):  # was: NumPy's "truth value" error
    with pytest.raises(ValueError, match=rf"{option} must be one of .*; got array of shape"):
      metrics.mean_average_precision(q, db, ql, dl, **{option: np.array(["index", "aware"])})


def test_packed_words_of_wider_integers_must_fit_32_bits():
  for words, bits in (([[-1]], 32), ([[2**40]], 32), ([[0, 2**40]], 33)):  # was: passed
    with pytest.raises(ValueError, match=r"p must hold 32-bit words"):
      codes.check_padding(np.array(words, np.int64), bits, "p")
  codes.check_padding(np.array([[5, 1]], np.int64), 33, "p")


def test_subnormal_weights_are_refused(rng):
  q, db = _signs(rng, 3, 8), _signs(rng, 20, 8)
  tiny = ((rng.random(8) + 0.5) * 1e-38).astype(np.float32)  # was: a wrong ranking
  with pytest.raises(ValueError, match=r"weights must be 0 or at least 1\.18e-38"):
    search.weighted_hamming_topk(q, db, tiny, 3)
  with pytest.raises(ValueError, match=r"weights must be 0 or at least"):
    metrics.mean_average_precision(q, db, np.arange(3) % 2, np.arange(20) % 2, weights=tiny)
  search.weighted_hamming_topk(q, db, tiny * 1e3, 3)  # scaled up: accepted


def test_small_index_helpers_name_their_arguments():
  with pytest.raises(ValueError, match=r"num_bits must be a Python int >= 1; got list"):
    index.flip_masks([4], 2)  # was: lru_cache's "unhashable type"
  ids = np.arange(6, dtype=np.uint64) + np.uint64(2**63)
  with pytest.raises(ValueError, match=r"got values from 9223372036854775808 to"):
    index.build_index(np.ones((6, 12), np.int8), num_bits=12, item_ids=ids)  # was: negative

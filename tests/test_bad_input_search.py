"""Bad input to the search, index, codes and metrics functions: each case once gave a
silent answer or a traceback from deep inside; now a ValueError names the argument."""

import jax
import numpy as np
import pytest

from jhash import codes, index, metrics, search


def _signs(rng, n, k):
  return np.where(rng.random((n, k)) < 0.5, 1, -1).astype(np.int8)


def test_pairwise_hamming_checks_what_it_can_see_under_jit(rng):
  q, d = codes.pack_bits(_signs(rng, 4, 64)), codes.pack_bits(_signs(rng, 6, 32))
  with pytest.raises(ValueError, match="same number of words per code; got 2"):
    search.pairwise_hamming(q, d)  # once: distances over the first word only
  with pytest.raises(ValueError, match="query_packed must be packed codes of dtype uint32"):
    search.pairwise_hamming(_signs(rng, 4, 16), _signs(rng, 4, 16))
  with pytest.raises(ValueError, match="query_packed must be 2-D"):
    search.pairwise_hamming(q[0], q)
  with pytest.raises(ValueError, match="method must be 'auto', 'xor' or 'matmul'"):
    jax.jit(search.pairwise_hamming, static_argnums=(2, 3))(q, q, 64, "popcount")
  # The checks read shapes only: traced codes still run.
  got = jax.jit(search.pairwise_hamming)(q, q)
  np.testing.assert_array_equal(got, search.hamming_distance(q, q))


def test_weighted_distance_and_weight_units_refuse_what_they_would_misread(rng):
  s = _signs(rng, 4, 16)
  packed = codes.pack_bits(_signs(rng, 4, 64))
  with pytest.raises(ValueError, match=r"query_codes must hold only -1 and \+1.*unpack_bits"):
    search.weighted_hamming_distance(packed, packed, np.ones(2))  # once: a [4, 4] answer
  with pytest.raises(ValueError, match=r"weights must have one entry per bit \(16\)"):
    search.weighted_hamming_distance(s, s, np.ones(3))
  with pytest.raises(ValueError, match="weights must be 1-D"):
    search.weight_units(np.ones((2, 3)))
  with pytest.raises(ValueError, match="weights must be real numbers"):
    search.weight_units(np.ones(3) * 1j)
  with pytest.raises(ValueError, match="weights must hold finite values"):
    search.weight_units(np.array([1.0, np.nan]))
  with pytest.raises(ValueError, match="weights must be real numbers"):
    metrics.mean_average_precision(s, s, np.arange(4), np.arange(4), weights=np.ones(16) * 1j)


def test_lists_and_object_arrays_are_named_not_a_deep_traceback(rng):
  with pytest.raises(ValueError, match="query_packed must be packed codes of dtype uint32"):
    search.hamming_distance([[1]], [[1]])
  with pytest.raises(ValueError, match="query_packed must be packed codes of dtype uint32"):
    search.hamming_topk([[1]], [[1]], 1)
  with pytest.raises(ValueError, match="codes must be a real array of -1 and"):
    codes.pack_bits(np.array([[1, -1]], dtype=object))
  labels = np.zeros(3, np.int32)
  with pytest.raises(ValueError, match="query_codes must be a real array of -1 and"):
    metrics.mean_average_precision(np.ones((3, 4), object), _signs(rng, 3, 4), labels, labels)
  with pytest.raises(ValueError, match="distances must be an array"):
    metrics.average_precision([[1, 0]], np.ones((1, 2), bool))
  with pytest.raises(ValueError, match="relevance must be an array"):
    metrics.average_precision(np.zeros((1, 2), np.int32), [[True, False]])


def test_pack_bits_takes_bits_as_a_bool_only(rng):
  s = _signs(rng, 2, 3)
  with pytest.raises(ValueError, match="bits must be True or False; got int 1"):
    codes.pack_bits(s, bits=1)
  np.testing.assert_array_equal(codes.pack_bits(s > 0, bits=True), codes.pack_bits(s))


def test_multi_code_hamming_checks_its_mask(rng):
  q = codes.pack_bits(_signs(rng, 4, 32))
  db = np.stack([q, q], axis=1)
  with pytest.raises(ValueError, match=r"db_mask must have shape \(4, 2\)"):
    search.multi_code_hamming(q, db, np.ones((4, 3), bool))
  with pytest.raises(ValueError, match="db_mask must be boolean"):
    search.multi_code_hamming(q, db, np.ones((4, 2), np.int32))
  with pytest.raises(ValueError, match="at least one valid code per item"):
    search.multi_code_hamming(q, db, np.zeros((4, 2), bool))


def test_metric_messages_name_the_argument_and_the_cut_off(rng):
  labels = np.zeros(5, np.int32)
  with pytest.raises(ValueError, match="query_codes must have a last axis of num_bits >= 1"):
    metrics.mean_average_precision(
      np.ones((3, 0), np.int8), np.ones((5, 0), np.int8), labels[:3], labels
    )
  s = _signs(rng, 5, 8)
  with pytest.raises(ValueError, match=r"k must be one int in \[1, 5\]; got tuple"):
    metrics.ndcg_at_k(s[:2], s, labels[:2], labels, k=(1, 2))


def test_index_functions_name_index_radius_and_a_traced_radius(rng):
  s = _signs(rng, 50, 16)
  ix = index.build_index(s, num_bits=16)
  q = codes.pack_bits(s[:3])
  with pytest.raises(ValueError, match="radius must be <= num_bits=16; got 17"):
    index.radius_search(ix, q, 17)
  with pytest.raises(ValueError, match="radius must be a Python int >= 0; got a traced value"):
    jax.jit(lambda r: index.radius_search(ix, q, r))(1)
  with pytest.raises(ValueError, match="index must be a BucketIndex"):
    index.lookup({"keys": 1}, q)
  with pytest.raises(ValueError, match="index must be a BucketIndex"):
    index.radius_search({"keys": 1}, q, 1)
  with pytest.raises(TypeError, match="cannot run inside jit or vmap"):
    jax.jit(lambda c: index.build_index(c, num_bits=16))(s)


def test_index_helpers_name_their_arguments(rng):
  with pytest.raises(ValueError, match="num_substrings must be >= 1; got 0"):
    index.substring_layout(16, 0)  # was: ZeroDivisionError
  with pytest.raises(ValueError, match="num_substrings must be at most num_bits=16"):
    index.substring_layout(16, 17)  # was: a substring of length 0
  assert index.substring_layout(16, 3) == ((0, 6), (6, 5), (11, 5))
  with pytest.raises(ValueError, match="num_buckets must be >= 0; got -1"):
    index.suggested_num_substrings(-1, 16)
  s = _signs(rng, 20, 16)
  ix = index.build_index(s, num_bits=16)
  with pytest.raises(TypeError, match="radius_search is host-level"):
    jax.jit(lambda q: index.radius_search(ix, q, 2))(codes.pack_bits(s[:3]))


def test_metric_helpers_refuse_what_they_would_misread(rng):
  d = rng.integers(0, 17, (4, 30)).astype(np.int32)
  with pytest.raises(ValueError, match=r"k must be a Python int in \[1, 30\]"):
    metrics.ranked_positions(d, 0)  # was: shape (4, 0)
  with pytest.raises(ValueError, match=r"k must be a Python int in \[1, 30\]"):
    metrics.ranked_positions(d, 31)
  with pytest.raises(ValueError, match="distances must be an array"):
    metrics.ranked_positions(d.tolist(), 3)
  with pytest.raises(ValueError, match="distances must hold real numbers"):
    metrics.ranked_positions(d.astype(str), 3)
  np.testing.assert_array_equal(
    metrics.ranked_positions(d, 30), np.argsort(d, axis=1, kind="stable")
  )
  with pytest.raises(ValueError, match=r"0 <= a <= b"):
    metrics.harmonic_difference(-3, 2)  # was: inf
  with pytest.raises(ValueError, match="a must be numbers"):
    metrics.harmonic_difference("a", 2)
  np.testing.assert_allclose(metrics.harmonic_difference(2, 4), 1 / 3 + 1 / 4, rtol=1e-6)
  with pytest.raises(ValueError, match="radius must be >= 0"):
    metrics.buckets_within(4, -1)  # was: 0
  with pytest.raises(ValueError, match="num_bits must be a Python int"):
    metrics.buckets_within(4.0, 1)
  assert metrics.buckets_within(4, 2) == 1 + 4 + 6
  # The no-code sentinel of multi_code_hamming may pass max_distance; nothing else may.
  d[0, 0] = np.iinfo(np.int32).max
  metrics.average_precision(d, d < 8, max_distance=16)

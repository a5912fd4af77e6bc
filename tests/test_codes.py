"""jhash.codes: the sign rule, packing, and the checks on codes and padding bits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jhash import codes


@pytest.mark.parametrize("bad", [0, 0.3, np.nan, 2], ids=["zero", "fraction", "nan", "two"])
def test_pack_bits_rejects_values_other_than_plus_minus_one(bad):
  # 0 and NaN used to become clear bits, 0.3 a set bit, while the metrics reject them.
  signs = np.ones((3, 12), np.float32)
  signs[1, 5] = bad
  with pytest.raises(ValueError, match=r"codes must hold only -1 and \+1.*index \(1, 5\)"):
    codes.pack_bits(signs)
  with pytest.raises(ValueError, match=r"codes must hold only -1 and \+1"):
    codes.pack_bits(jnp.asarray(signs))


def test_bits_are_packed_when_said_and_refused_as_signs_with_the_way():
  rng = np.random.default_rng(3)
  signs = np.where(rng.random((4, 45)) < 0.5, -1, 1).astype(np.int8)
  bits = signs > 0
  want = np.asarray(codes.pack_bits(signs))
  for given in (bits, bits.astype(np.uint8), bits.astype(np.float32)):
    np.testing.assert_array_equal(codes.pack_bits(given, bits=True), want)
    np.testing.assert_array_equal(codes.from_bits(given), signs)
    assert codes.from_bits(given).dtype == np.int8
    with pytest.raises(ValueError, match=r"(only|signs) -1 and \+1.*jhash.codes.from_bits"):
      codes.pack_bits(given)  # not silently: a clear bit is not a -1 without saying so
  with pytest.raises(ValueError, match=r"codes \(bits=True\) must hold only 0 and 1"):
    codes.pack_bits(signs, bits=True)  # -1 is not a bit
  with pytest.raises(ValueError, match=r"bits must hold only 0 and 1.*index \(0, 2\)"):
    codes.from_bits(np.array([[0, 1, 2]]))


def test_pack_bits_stays_jittable():
  # Inside jit the values are traced, so they are not checked; the packing is the same.
  signs = np.where(np.random.default_rng(0).random((4, 40)) < 0.5, -1, 1).astype(np.int8)
  np.testing.assert_array_equal(jax.jit(codes.pack_bits)(signs), codes.pack_bits(signs))
  assert codes.pack_bits(np.ones((0, 7), np.int8)).shape == (0, 1)


def test_check_padding_names_the_argument_and_the_code():
  packed = np.array(codes.pack_bits(np.ones((3, 12), np.int8)))
  codes.check_padding(packed, 12, "db_packed")  # pack_bits leaves the padding zero
  codes.check_padding(packed | np.uint32(1 << 20), 32, "db_packed")  # no padding at 32 bits
  packed[2, 0] |= np.uint32(1 << 12)
  with pytest.raises(ValueError, match=r"db_packed sets bits past num_bits=12 .*code 2"):
    codes.check_padding(packed, 12, "db_packed")
  np.testing.assert_array_equal(codes.padding_mask(12), [0xFFFFF000])
  np.testing.assert_array_equal(codes.padding_mask(64), [0, 0])


def test_to_bytes_of_no_codes():
  assert codes.to_bytes(np.zeros((0, 2), np.uint32)).shape == (0, 8)


def test_sign_maps_zero_to_plus_one():
  x = jnp.asarray([-2.0, -0.0, 0.0, 1e-30, -1e-30, 3.0])
  np.testing.assert_array_equal(codes.sign(x), np.array([-1, 1, 1, 1, -1, 1], np.int8))
  assert codes.sign(x).dtype == jnp.int8


def test_bytes_are_faiss_order_and_round_trip_from_a_partial_word():
  # Bit j is bit j % 8 of byte j // 8; FAISS keeps ceil(K / 8) bytes, which from_bytes pads.
  signs = -np.ones((2, 20), np.int8)
  signs[0, 9] = signs[1, [0, 19]] = 1
  packed = np.asarray(codes.pack_bits(signs))
  as_bytes = codes.to_bytes(packed)
  np.testing.assert_array_equal(as_bytes, [[0, 2, 0, 0], [1, 0, 8, 0]])
  np.testing.assert_array_equal(codes.from_bytes(as_bytes[:, :3]), packed)
  np.testing.assert_array_equal(codes.from_bytes(as_bytes), packed)


def test_unpack_bits_needs_exactly_the_words_of_num_bits():
  packed = np.asarray(codes.pack_bits(np.ones((2, 40), np.int8)))
  with pytest.raises(ValueError, match="packed must have 1 words for num_bits=12"):
    codes.unpack_bits(packed, 12)
  with pytest.raises(ValueError, match="packed must have 2 words for num_bits=40"):
    codes.unpack_bits(packed[:, :1], 40)

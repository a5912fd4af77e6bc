"""Binary codes: the sign rule, and packing {-1,+1} codes into 32-bit words.

Layout of a packed code (``pack_bits``): a code of ``K`` bits becomes
``ceil(K / 32)`` unsigned 32-bit words. Bit ``j`` of the code (column ``j`` of
the ``[n, K]`` code matrix) is bit ``j % 32`` (least significant first) of word
``j // 32``; a bit is 1 where the code is +1. Bits past ``K`` in the last word
are 0, so XOR and population count give Hamming distances directly.

On a little-endian host, viewing the words as bytes gives FAISS's binary
layout (bit ``j`` is bit ``j % 8`` of byte ``j // 8``): see ``to_bytes``.

Words of 32 bits were chosen over bytes by measurement: XOR + population count
over uint32 words runs about 3x faster than over uint8 on the CPU backend (one
XOR per 32 bits instead of four), and JAX has no 64-bit integers unless x64 is
enabled.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks

__all__ = [
  "WORD_BITS",
  "num_words",
  "sign",
  "from_bits",
  "pack_bits",
  "unpack_bits",
  "to_bytes",
  "from_bytes",
  "padding_mask",
  "check_signs",
  "check_bits",
  "check_packed",
  "check_padding",
]

#: Bits per word of a packed code (words are uint32).
WORD_BITS = 32


def num_words(num_bits: int) -> int:
  """Number of uint32 words holding a code of ``num_bits`` bits (an int >= 0)."""
  return -(-_checks.nonneg_int(num_bits, "num_bits") // WORD_BITS)


def sign(x: jax.Array) -> jax.Array:
  """Sign that never yields 0: ``+1`` where ``x >= 0`` (zero included), else ``-1``.

  NaN maps to ``-1`` (``NaN >= 0`` is false); public entry points reject NaN
  features before they reach this rule.

  Args:
    x: any real array (not bool: bits are ``from_bits``'s).
  Returns:
    int8 array of the same shape with entries in {-1, +1}.
  """
  dtype = _dtype_of(x)
  if dtype == np.bool_ or dtype.kind not in "iuf" and dtype.name != "bfloat16":
    hint = " (bits: jhash.codes.from_bits)" if dtype == np.bool_ else ""
    raise TypeError(f"x must be a real array{hint}; got {_checks.describe(x)}.")
  return jnp.where(jnp.asarray(x) >= 0, jnp.int8(1), jnp.int8(-1))


def _pack_one(bits: jax.Array) -> jax.Array:
  """Pack one code of 0/1 bits [K] into uint32 words [ceil(K/32)]."""
  k = bits.shape[0]
  w = num_words(k)
  padded = jnp.zeros((w * WORD_BITS,), jnp.uint32).at[:k].set(bits.astype(jnp.uint32))
  shifts = jnp.arange(WORD_BITS, dtype=jnp.uint32)
  return jnp.sum(padded.reshape(w, WORD_BITS) << shifts[None, :], axis=-1, dtype=jnp.uint32)


def check_signs(codes, name: str = "codes") -> None:
  """Raise unless a concrete ``codes`` holds only -1 and +1 (traced values pass unchecked)
  and is not bool (bits, even all True, are not signs)."""
  if _dtype_of(codes) == np.bool_:
    raise ValueError(
      f"{name} must be signs -1 and +1 (integer or floating); got {_checks.describe(codes)}. "
      "Codes as bits (bool or 0/1): jhash.codes.from_bits(codes)."
    )
  if not _checks.is_concrete(codes):
    return
  a = np.asarray(codes)
  if not (a.dtype.kind in "biuf" or a.dtype.name == "bfloat16"):
    raise ValueError(f"{name} must be a real array of -1 and +1; got {_checks.describe(a)}.")
  bad = (a != 1) & (a != -1)
  if bad.any():
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    as_bits = a.dtype == np.bool_ or bool(np.isin(a, (0, 1)).all())
    hint = " Codes as bits (bool or 0/1): jhash.codes.from_bits(codes)." if as_bits else ""
    raise ValueError(
      f"{name} must hold only -1 and +1; found {int(bad.sum())} other entries "
      f"(values {np.unique(a[bad])[:5].tolist()}, first at index {where}) in "
      f"{_checks.describe(a)}.{hint}"
    )


def check_bits(bits, name: str = "bits") -> None:
  """Raise unless a concrete ``bits`` is bool or holds only 0 and 1 (traced values pass)."""
  if not _checks.is_concrete(bits):
    return
  a = np.asarray(bits)
  if a.dtype == np.bool_:
    return
  if not (a.dtype.kind in "iuf" or a.dtype.name == "bfloat16"):
    raise ValueError(f"{name} must be bool or 0/1 numbers; got {_checks.describe(a)}.")
  bad = (a != 0) & (a != 1)
  if bad.any():
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    raise ValueError(
      f"{name} must hold only 0 and 1 (or be bool); found {int(bad.sum())} other entries "
      f"(values {np.unique(a[bad])[:5].tolist()}, first at index {where}) in "
      f"{_checks.describe(a)}."
    )


def from_bits(bits: jax.Array) -> jax.Array:
  """Codes in {-1,+1} (int8) from bits: bool or {0, 1} (1 is +1), as most PyTorch code
  makes them (``(h > 0)``, ``(h + 1) / 2``).

  Args:
    bits: [..., K] bool, or integer / floating in {0, 1} (checked when concrete).
  Returns:
    int8 [..., K] in {-1, +1}, for every jhash function that takes codes.

  >>> import numpy as np
  >>> from jhash import codes
  >>> codes.from_bits(np.array([[True, False, True]])).tolist()
  [[1, -1, 1]]
  """
  check_bits(bits)
  bits = jnp.asarray(bits)
  return jnp.where(bits > 0, jnp.int8(1), jnp.int8(-1))


def pack_bits(codes: jax.Array, *, bits: bool = False) -> jax.Array:
  """Pack codes in {-1,+1} into uint32 words (+1 is a set bit, -1 a clear bit).

  Concrete codes holding anything else (0, 0.3, NaN, bools) raise a ValueError,
  as the metrics do; inside jit the values are not checked and ``x > 0`` is a set
  bit. Codes as bits (bool, or {0, 1}) are packed with ``bits=True``.

  Args:
    codes: [..., K] array in {-1,+1}, integer or floating; with ``bits=True``, bool or
      {0, 1} (1 is a set bit).
    bits: the codes are bits, not signs.
  Returns:
    uint32 array [..., ceil(K / 32)] in the layout of this module's docstring.

  >>> import numpy as np
  >>> from jhash import codes
  >>> signs = np.array([[1, -1, 1]])
  >>> codes.pack_bits(signs).tolist(), codes.pack_bits(signs > 0, bits=True).tolist()
  ([[5]], [[5]])
  """
  if _checks.flag(bits, "bits"):
    check_bits(codes, "codes (bits=True)")
  else:
    check_signs(codes)
  codes = jnp.asarray(codes)
  if codes.ndim < 1 or codes.shape[-1] < 1:
    raise ValueError(f"codes must have a last axis of num_bits >= 1; got shape {codes.shape}.")
  return _pack(codes)


@jax.jit
def _pack(codes: jax.Array) -> jax.Array:
  # One compiled program per shape (run eagerly, its dozen operations would each be
  # compiled for every new shape of codes); inlined when traced.
  bits = codes > 0
  lead = codes.shape[:-1]
  flat = bits.reshape(-1, codes.shape[-1])
  packed = jax.vmap(_pack_one)(flat)
  return packed.reshape(*lead, packed.shape[-1])


def unpack_bits(packed: jax.Array, num_bits: int, signed: bool = True) -> jax.Array:
  """Inverse of ``pack_bits``.

  Args:
    packed: uint32 [..., W] with ``W == ceil(num_bits / 32)``.
    num_bits: K, the code length.
    signed: return codes in {-1,+1} (int8) when True, else {0,1} (uint8).
  Returns:
    int8 (or uint8) array [..., num_bits].
  Raises:
    ValueError: when concrete ``packed`` sets bits past ``num_bits`` (codes packed at
      another length: unpacking them shorter would drop bits without a word).
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  signed = _checks.flag(signed, "signed")
  _check_words(packed, "packed")
  if _checks.is_concrete(packed) and _dtype_of(packed) != np.uint32:  # words checked above:
    packed = np.asarray(packed).astype(np.uint32)  # int64 past 2**31 as uint32, not wrapped
  packed = jnp.asarray(packed)
  if packed.shape[-1] != num_words(num_bits):
    raise ValueError(
      f"packed must have {num_words(num_bits)} words for num_bits={num_bits}; "
      f"got shape {packed.shape}."
    )
  check_padding(packed, num_bits, "packed")  # set bits past num_bits would be dropped
  shifts = jnp.arange(WORD_BITS, dtype=jnp.uint32).reshape((1,) * packed.ndim + (WORD_BITS,))
  bits = (packed.astype(jnp.uint32)[..., None] >> shifts) & jnp.uint32(1)
  # The last axis spelled out, not -1: it cannot be inferred for no codes.
  bits = bits.reshape(*packed.shape[:-1], packed.shape[-1] * WORD_BITS)
  bits = bits[..., :num_bits].astype(jnp.uint8)
  if signed:
    return (2 * bits.astype(jnp.int8) - 1).astype(jnp.int8)
  return bits


def _check_words(packed, name: str) -> None:
  """Words of packed codes: [..., W] integers, values in [0, 2^32) when concrete."""
  if np.ndim(packed) < 1:
    raise ValueError(
      f"{name} must have a last axis of words, [..., W] (packed codes); got "
      f"{_checks.describe(packed)}."
    )
  dtype = _dtype_of(packed)
  if dtype.kind not in "iu":
    raise ValueError(
      f"{name} must be packed codes, uint32 words (jhash.codes.pack_bits); got "
      f"{_checks.describe(packed)}."
    )
  if dtype != np.uint32 and _checks.is_concrete(packed):
    a = np.asarray(packed)
    if a.size and (a.min() < 0 or a.max() >= 2**32):
      raise ValueError(
        f"{name} must hold 32-bit words (0 to 2**32 - 1); found values from {a.min()} to "
        f"{a.max()} in {_checks.describe(a)}."
      )


def check_packed(packed, name: str, num_words_expected: int | None = None) -> None:
  """Raise unless ``packed`` is a uint32 [n, W] array with W >= 1."""
  _checks.rank(packed, 2, name, "with shape [n, words] (packed codes)")
  dtype = _dtype_of(packed)
  if dtype != np.uint32:
    raise ValueError(
      f"{name} must be packed codes of dtype uint32 (see jhash.codes.pack_bits); got dtype {dtype}."
    )
  if num_words_expected is not None and packed.shape[1] != num_words_expected:
    raise ValueError(
      f"{name} must have {num_words_expected} words per code; got shape {tuple(packed.shape)}."
    )
  if packed.shape[1] < 1:
    raise ValueError(
      f"{name} must have at least one word per code (a code has num_bits >= 1); got shape "
      f"{tuple(packed.shape)}."
    )


def padding_mask(num_bits: int) -> np.ndarray:
  """uint32 [W]: the bits of each word that lie past bit ``num_bits - 1``."""
  w = num_words(num_bits)
  mask = np.zeros((w,), np.uint32)
  used = num_bits - WORD_BITS * (w - 1)
  if used < WORD_BITS:
    mask[-1] = np.uint32(0xFFFFFFFF) ^ np.uint32((1 << used) - 1)
  return mask


def check_padding(packed, num_bits: int, name: str) -> None:
  """Raise when a concrete packed array [..., W] sets bits past ``num_bits``.

  Such bits count in XOR + population count, so distances would come out wrong
  (12-bit codes at distance 20). Traced values (inside jit) pass unchecked. ``packed``
  must have ``num_words(num_bits)`` words (a ValueError otherwise).
  """
  words = num_words(_checks.positive_int(num_bits, "num_bits"))
  if _dtype_of(packed).kind not in "iu":
    raise ValueError(
      f"{name} must be packed codes, integer words (uint32, as jhash.codes.pack_bits makes "
      f"them); got {_checks.describe(packed)}."
    )
  if np.ndim(packed) < 1 or np.shape(packed)[-1] != words:
    raise ValueError(
      f"{name} must have {words} words for num_bits={num_bits}, [..., {words}]; got "
      f"{_checks.describe(packed)}."
    )
  if not _checks.is_concrete(packed):
    return
  a = np.asarray(packed).reshape(-1, num_words(num_bits))
  if a.dtype != np.uint32 and a.size and (a.min() < 0 or a.max() > 0xFFFFFFFF):
    raise ValueError(
      f"{name} must hold 32-bit words (0 to 2**32 - 1); found {a.min()} to {a.max()} in "
      f"{_checks.describe(packed)}."
    )
  if num_bits % WORD_BITS == 0:
    return
  bad = (a & padding_mask(num_bits)[None, :]) != 0
  if bad.any():
    row = int(np.argwhere(bad.any(axis=1))[0, 0])
    raise ValueError(
      f"{name} sets bits past num_bits={num_bits} in {int(bad.any(axis=1).sum())} "
      f"codes (first: code {row}, words {a[row].tolist()}); packed codes must have "
      "zero padding bits, as jhash.codes.pack_bits makes them (or num_bits is shorter "
      "than the length they were packed at)."
    )


def _dtype_of(x) -> np.dtype:
  """The dtype of an array, or of what NumPy makes of a list or scalar."""
  return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def _host_only(x, name: str) -> None:
  if not _checks.is_concrete(x):
    raise TypeError(
      f"jhash.codes.{name} makes a NumPy array on the host (for FAISS), so it cannot run "
      "inside jit or vmap; call it on the result."
    )


def to_bytes(packed) -> np.ndarray:
  """Packed uint32 words [n, W] as uint8 bytes [n, 4 W] in FAISS's bit order.

  FAISS reads bit ``j`` of a code as bit ``j % 8`` of byte ``j // 8``; with
  words stored little-endian this is exactly ``pack_bits``'s layout.
  """
  _host_only(packed, "to_bytes")
  _checks.rank(packed, 2, "packed", "with shape [n, words] (packed codes)")
  _check_words(packed, "packed")
  a = np.asarray(packed)
  bits_like = a.shape[1] > 1 and a.size and np.isin(a, (-1, 0, 1)).all() and np.abs(a).max()
  if a.dtype != np.uint32 and bits_like:  # words of 0 and 1 only: bits, not packed codes
    raise ValueError(
      f"packed must be packed codes, uint32 words [n, ceil(K / 32)]; got "
      f"{_checks.describe(a)} holding only bits or signs (0, 1, -1): pack them first "
      "(jhash.codes.pack_bits)."
    )
  a = np.ascontiguousarray(a.astype("<u4"))
  return a.view(np.uint8).reshape(a.shape[0], 4 * a.shape[1])


def from_bytes(data) -> np.ndarray:
  """Inverse of ``to_bytes`` (the byte count is padded up to whole words)."""
  _host_only(data, "from_bytes")
  _checks.rank(data, 2, "data", "with shape [n, bytes] (FAISS binary codes)")
  dtype = _dtype_of(data)
  a = np.asarray(data)
  if dtype.kind not in "iu" or (a.size and (a.min() < 0 or a.max() > 255)):
    raise ValueError(f"data must be bytes (uint8, 0 to 255); got {_checks.describe(a)}.")
  a = a.astype(np.uint8)
  pad = (-a.shape[1]) % 4
  if pad:
    a = np.concatenate([a, np.zeros((a.shape[0], pad), np.uint8)], axis=1)
  return np.ascontiguousarray(a).view("<u4").astype(np.uint32)

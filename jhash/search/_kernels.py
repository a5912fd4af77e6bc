"""Distance kernels of the block-minima search, written for XLA's CPU code generator.

Plain Hamming distance on packed codes: 8 sub-blocks side by side in vector
lanes (``lanes_layout``), a bit-sliced popcount for codes of 2 or more words
(``_swar_popcount_sum``), a compact layout past ``MAX_UNROLLED_WORDS`` words, and
the +-1 matrix-product form for accelerators.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
from jax import lax

from jhash import codes as codes_lib
from jhash.search._blockmin import SUB_BLOCK

# ----------------------------------------------------------------------------------------------
# Plain Hamming distance.

LANES = 8  # sub-blocks side by side in the fused loop (one AVX2 vector of int32)


def lanes_layout(a: jax.Array, num_blocks: int, block: int) -> jax.Array:
  """[rows, ...] -> [T, ..., block / 256, 32, 8]: item s of sub-block 8 j + l at [..., j, s, l].

  With this layout the fused loop reads 8 sub-blocks at once with contiguous
  vector loads and takes the sub-block minimum with elementwise minima. (Laid
  out [sub-block, item], XLA's CPU code gathered the 8 lanes one word at a time:
  1.3-1.6x slower at 32 and 64 bits.)
  """
  rest = a.shape[1:]
  a = a.reshape(num_blocks, block // (SUB_BLOCK * LANES), LANES, SUB_BLOCK, *rest)
  order = (0,) + tuple(range(4, 4 + len(rest))) + (1, 3, 2)
  return a.transpose(order)


def compact_layout(a: jax.Array, num_blocks: int, block: int) -> jax.Array:
  """[rows, ...] -> [T, ..., block / 32, 32]: item s of sub-block j at [..., j, s]."""
  rest = a.shape[1:]
  a = a.reshape(num_blocks, block // SUB_BLOCK, SUB_BLOCK, *rest)
  return a.transpose((0,) + tuple(range(3, 3 + len(rest))) + (1, 2))


# The lanes kernels unroll the 32 items of a sub-block, so their compile time grows
# with the words per item (words x codes per item): compile and first call took
# 3 s at 1 word, 4.5 s at 2 and 12 s at 4 on the busy 2-core test machine, against
# 2.3 s for the compact kernels (the minimum over the 32 items as one reduction).
# The compact kernels run 1.6x slower at 32 bits, 1.3x at 64, 6% at 128, so the
# lanes kernels are used up to this many words.
MAX_UNROLLED_WORDS = 2


def xor_layout(padded, num_blocks: int, block: int):
  return lanes_layout(padded, num_blocks, block)  # [T, W, block / 256, 32, 8]


def _swar_popcount_sum(words) -> jax.Array:
  """``sum_w popcount(words[w])`` for uint32 arrays, bit-sliced ("SWAR").

  Counts per 2 then 4 bits, adds up to 3 words per 4-bit field (at most 12),
  widens to 8-bit fields, adds those, and sums the 4 bytes with one multiply
  (exact while the total is below 256: 7 words at a time). Against
  ``lax.population_count`` per word (which on AVX2 lowers to nibble lookups plus
  a byte-to-word sum for every word) this measured 12% faster at 64 bits and 7%
  at 128, 5% slower at 32 (one word), where ``population_count`` is used instead.
  """
  u = jnp.uint32
  result = None
  for start in range(0, len(words), 7):
    chunk, fields, acc = words[start : start + 7], [], None
    for i, x in enumerate(chunk):
      x = x - ((x >> 1) & u(0x55555555))
      x = (x & u(0x33333333)) + ((x >> 2) & u(0x33333333))
      acc = x if acc is None else acc + x
      if i % 3 == 2 or i == len(chunk) - 1:
        fields.append((acc & u(0x0F0F0F0F)) + ((acc >> 4) & u(0x0F0F0F0F)))
        acc = None
    total = fields[0]
    for f in fields[1:]:
      total = total + f
    part = ((total * u(0x01010101)) >> 24).astype(jnp.int32)
    result = part if result is None else result + part
  return result


def xor_item(qc, blk, s):
  """Distances [c, block / 256, 8] of item s of every sub-block: blk [W, block / 256, 32, 8]."""
  return _popcount_sum([qc[:, w, None, None] ^ blk[w, :, s][None] for w in range(blk.shape[0])])


def xor_block_minima(qc, blk):
  m = xor_item(qc, blk, 0)
  for s in range(1, SUB_BLOCK):
    m = jnp.minimum(m, xor_item(qc, blk, s))
  return m.reshape(qc.shape[0], -1)


def _popcount_sum(words) -> jax.Array:
  if len(words) == 1:
    return lax.population_count(words[0]).astype(jnp.int32)
  return _swar_popcount_sum(words)


def xor_compact_distances(qc, blk):
  """blk [W, block / 32, 32] -> distances [c, block / 32, 32]."""
  return _popcount_sum([qc[:, w, None, None] ^ blk[w][None] for w in range(blk.shape[0])])


def xor_compact_minima(qc, blk):
  return jnp.min(xor_compact_distances(qc, blk), axis=-1)


def xor_candidates(qc, cand):
  x = lax.population_count(qc[:, None, None, :] ^ cand).astype(jnp.int32)
  return jnp.sum(x, axis=-1)


def matmul_layout(padded, num_blocks: int, block: int):
  return padded.reshape(num_blocks, block, padded.shape[1])


def _unpack_signs(packed: jax.Array) -> jax.Array:
  """uint32 [r, W] -> float32 [r, 32 W] in {-1,+1} (padding bits give -1 on both sides)."""
  shifts = jnp.arange(codes_lib.WORD_BITS, dtype=jnp.uint32)[None, None, :]
  bits = (packed[:, :, None] >> shifts) & jnp.uint32(1)
  return 2.0 * bits.reshape(packed.shape[0], -1).astype(jnp.float32) - 1.0


def matmul_block_minima(qc, blk):
  # d = (32 W - <q, b>) / 2 over all 32 W bit positions; padding bits are equal (0)
  # in both codes, so they add nothing. Exact in float32 (integers below 2**24).
  dots = lax.dot_general(
    _unpack_signs(qc),
    _unpack_signs(blk),
    (((1,), (1,)), ((), ())),
    preferred_element_type=jnp.float32,
  )
  d = ((codes_lib.WORD_BITS * qc.shape[1] - dots) * 0.5).astype(jnp.int32)
  return jnp.min(d.reshape(qc.shape[0], -1, SUB_BLOCK), axis=-1)

"""Controls for MCH: other rules for which extra codes an item keeps, on the same codes.

MCH keeps the code of each of an item's five fixed crops whose keep probability passes
``xi``. Whether its agent chose well shows only beside other rules applied to the same
trained base model and the same crops (``MCHExtras.crop_codes``):

* ``keep_all``: every crop's code (what keeping without an agent gives);
* ``keep_at_random``: each crop independently with one probability, set so that the
  expected codes per item equal MCH's (is the agent better than chance at its rate?);
* ``oracle_keep``: exactly the crops whose keep reward (``jhash.losses.keep_rewards``)
  against the training items is positive, read with the item's own labels: the agent's
  target, known only to an oracle;
* a positive control: extra codes an agent could not do better than (each object of the
  item coded alone, ``jhash.data.scene_items_alone``), given to ``kept_codes``.

Each gives ``(codes, mask)`` through ``kept_codes``, as ``encode_multi`` does.

Arguments are checked at the door: shapes against each other (a ``ValueError`` naming the
arguments and their shapes), and, where the values are concrete (not traced under jit or
vmap), codes in {-1, +1}, similarities in {0, 1} and rates in [0, 1]. Under jit only the
shapes and dtypes are checked: the caller must pass signs, 0/1 similarities and a rate in
[0, 1] (other values give codes cast to int8, e.g. 0.3 to 0, and meaningless rewards).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash import losses
from jhash.methods._mch import _agent


def _shape(x) -> tuple[int, ...]:
  return tuple(int(d) for d in np.shape(x))


def _signs(x, name: str, rank: int, what: str) -> None:
  """``x``: a real array of rank ``rank`` (``what``: its shape, for the message) holding
  only -1 and +1 (checked where concrete)."""
  _checks.rank(x, rank, name, f"with shape {what}")
  _checks.real_array(x, name, f"codes {what} of -1 and +1 (int8 or float)")
  if not _checks.is_concrete(x):
    return
  a = np.asarray(x)
  bad = (a != 1) & (a != -1)
  if bad.any():
    vals = np.unique(a[bad])[:5].tolist()
    raise ValueError(
      f"{name} must hold codes as signs, only -1 and +1; found {int(bad.sum())} other "
      f"values ({vals}...) in {_checks.describe(x)} (jhash.codes.sign gives signs)."
    )


def _bool(x, name: str, rank: int, what: str, hint: str = "") -> None:
  _checks.rank(x, rank, name, f"with shape {what}")
  if _checks.dtype_of(x) != np.bool_:
    raise ValueError(f"{name} must be bool {what}; got {_checks.describe(x)}{hint}.")


def _mismatch(names: str, shapes: dict, rule: str) -> ValueError:
  got = ", ".join(f"{n} {list(s)}" for n, s in shapes.items())
  return ValueError(f"{names} do not fit together ({rule}); got {got}.")


def kept_codes(whole: jax.Array, extra: jax.Array, keep: jax.Array) -> tuple[jax.Array, jax.Array]:
  """An item's whole code first, then its extra codes, and which are kept.

  Args:
    whole: int8 or float [n, K] in {-1, +1}, each item's own code (always kept).
    extra: int8 or float [n, m, K] in {-1, +1}, candidate extra codes (crops' codes, or
      its objects').
    keep: bool [n, m], the extra codes to keep (keep probabilities are compared with a
      threshold first: ``keep > xi``).
  Returns:
    (codes int8 [n, 1 + m, K], mask bool [n, 1 + m]): a code equal to an earlier kept
    code of its item is not kept again (``dedupe_mask``).
  Raises:
    ValueError: shapes that do not fit, ``keep`` not bool, or (concrete values only)
      codes other than -1 and +1, which the cast to int8 would change (0.3 to 0). Under
      jit the caller must pass signs.
  """
  whole, extra, keep = (
    _checks.as_array(whole, "whole"),
    _checks.as_array(extra, "extra"),
    _checks.as_array(keep, "keep"),
  )
  _signs(whole, "whole", 2, "[n, K]")
  _signs(extra, "extra", 3, "[n, m, K]")
  _bool(keep, "keep", 2, "[n, m]", " (keep probabilities? pass keep > xi)")
  (n, k), (ne, m, ke), nk = _shape(whole), _shape(extra), _shape(keep)
  if ne != n or ke != k or nk != (n, m):
    raise _mismatch(
      "whole, extra and keep",
      {"whole": (n, k), "extra": (ne, m, ke), "keep": nk},
      "whole [n, K], extra [n, m, K], keep [n, m]",
    )
  codes = jnp.concatenate([whole[:, None, :], extra], axis=1).astype(jnp.int8)
  wanted = jnp.concatenate([jnp.ones_like(keep[:, :1], bool), keep.astype(bool)], axis=1)
  return codes, _agent.dedupe_mask(codes, wanted)


def keep_all(keep_probability: jax.Array) -> jax.Array:
  """bool [n, m]: every extra code kept (``keep_probability`` [n, m] gives the shape)."""
  _checks.rank(keep_probability, 2, "keep_probability", "with shape [n, m]")
  return jnp.ones(_shape(keep_probability), bool)


def keep_at_random(key: jax.Array, shape: tuple[int, int], rate: float | jax.Array) -> jax.Array:
  """bool ``shape``: each extra code kept independently with probability ``rate``.

  Args:
    key: one PRNG key.
    shape: (n, m), ints >= 0; a mask past the machine's memory is refused (ValueError).
    rate: a real scalar in [0, 1] (``matching_rate``); checked where concrete (under jit
      the caller must keep it in [0, 1]: above 1 keeps everything, below 0 or NaN nothing).
  """
  _checks.prng_key(key, "key")
  if (
    not isinstance(shape, (tuple, list))
    or len(shape) != 2
    or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0 for d in shape)
  ):
    raise ValueError(f"shape must be (n, m), two ints >= 0; got {_checks.describe(shape)}.")
  n, m = (int(d) for d in shape)
  _checks.fits_in_memory(
    {"the uniform draws (float32)": 4 * n * m, "the mask (bool)": n * m},
    f"keep_at_random of shape ({n}, {m})",
    "draw the mask in chunks of rows",
  )
  dtype = _checks.dtype_of(rate)
  real = dtype.kind in "iuf" or _checks._is_ml_float(dtype)
  if real and np.ndim(rate) == 0 and _checks.is_concrete(rate):
    r = float(np.asarray(rate, np.float64))
    if not 0.0 <= r <= 1.0:  # NaN fails too
      raise ValueError(f"rate must be a probability in [0, 1]; got {r!r}.")
  _checks.scalar(rate, "rate")
  return jax.random.bernoulli(key, rate, tuple(int(d) for d in shape))


def matching_rate(mask: jax.Array) -> jax.Array:
  """float32 [] in [0, 1]: the keep probability per extra code that gives, in expectation,
  the codes per item of ``mask`` (its whole code aside).

  Args:
    mask: bool [n, 1 + m], m >= 1, as ``kept_codes`` gives it: column 0, the whole code,
      True in every row (checked where concrete).
  Returns:
    the mean number of extra codes kept per item over ``m``; 0.0 when ``n = 0`` (no item:
    nothing kept).
  """
  _bool(mask, "mask", 2, "[n, 1 + m]", " (for a 0/1 mask pass mask.astype(bool))")
  n, columns = _shape(mask)
  if columns < 2:
    raise ValueError(
      f"mask must have 1 + m columns, the whole code and m >= 1 extra codes; got "
      f"{_checks.describe(mask)}."
    )
  if _checks.is_concrete(mask) and not np.asarray(mask)[:, 0].all():
    rows = np.flatnonzero(~np.asarray(mask)[:, 0])
    raise ValueError(
      f"mask's column 0 (each item's whole code, always kept) must be True; it is False in "
      f"{rows.size} of {n} rows (first {rows[:5].tolist()}) of {_checks.describe(mask)}."
    )
  if n == 0:
    return jnp.zeros((), jnp.float32)
  extra = jnp.sum(jnp.asarray(mask)[:, 1:], axis=1).astype(jnp.float32)
  return jnp.mean(extra) / (columns - 1)


def oracle_keep(
  whole: jax.Array,
  crops: jax.Array,
  others: jax.Array,
  similarity: jax.Array,
  table: jax.Array,
) -> jax.Array:
  """bool [n, m]: the crops whose keep reward is positive.

  Args:
    whole: [n, K] in {-1, +1}, the items' codes.
    crops: [n, m, K] in {-1, +1}, their crops' codes.
    others: [p, K] in {-1, +1}, the codes of the items the reward is read against (the
      training set).
    similarity: float (or bool) [n, p] in {0, 1}, by the items' own labels.
    table: float [2, K + 1], the base's loss on codes (``extras.code_loss``).
  Returns:
    ``keep_rewards`` of each crop > 0, pairs weighted as the agent's
    (``balanced_pair_weights``).
  Raises:
    ValueError: shapes that do not fit, or (concrete values only) codes other than -1
      and +1, similarities other than 0 and 1, or a NaN / infinite table. Under jit the
      caller must pass them so.
  """
  whole, crops, others, similarity = (
    _checks.as_array(whole, "whole"),
    _checks.as_array(crops, "crops"),
    _checks.as_array(others, "others"),
    _checks.as_array(similarity, "similarity"),
  )
  _signs(whole, "whole", 2, "[n, K]")
  _signs(crops, "crops", 3, "[n, m, K]")
  _signs(others, "others", 2, "[p, K]")
  _checks.rank(similarity, 2, "similarity", "with shape [n, p]")
  (n, k), (nc, m, kc), (p, ko) = _shape(whole), _shape(crops), _shape(others)
  if nc != n or kc != k or ko != k or _shape(similarity) != (n, p):
    raise _mismatch(
      "whole, crops, others and similarity",
      {"whole": (n, k), "crops": (nc, m, kc), "others": (p, ko), "similarity": _shape(similarity)},
      "whole [n, K], crops [n, m, K], others [p, K], similarity [n, p]",
    )
  if _checks.dtype_of(similarity) != np.bool_:
    _checks.real_array(similarity, "similarity", "float [n, p] in {0, 1}")
  if _checks.is_concrete(similarity):
    a = np.asarray(similarity)
    bad = (a != 0) & (a != 1)
    if bad.any():
      raise ValueError(
        f"similarity must hold only 0 and 1 (dissimilar, similar pairs); found "
        f"{int(bad.sum())} other values ({np.unique(a[bad])[:5].tolist()}...) in "
        f"{_checks.describe(similarity)}."
      )
  table = _checks.as_array(table, "table")
  if _shape(table) != (2, k + 1):
    raise ValueError(
      f"table must be the loss on codes [2, K + 1] = [2, {k + 1}] (extras.code_loss); got "
      f"{_checks.describe(table)}."
    )
  _checks.real_array(table, "table", "float [2, K + 1], the loss on codes (extras.code_loss)")
  _checks.finite(table, "table")
  weights = losses.balanced_pair_weights(similarity)
  whole, others = whole.astype(jnp.float32), others.astype(jnp.float32)

  def one_crop(crop):  # crop [n, K]
    return losses.keep_rewards(whole, crop.astype(jnp.float32), others, similarity, weights, table)

  rewards = jax.vmap(one_crop, in_axes=1, out_axes=1)(crops)
  return rewards > 0

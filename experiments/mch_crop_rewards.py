"""Why MCH keeps few crops on the canvases: the keep rewards of the five fixed crops, and
what keeping every crop would do.

Command:  python -m experiments.mch_crop_rewards [--base dch] [--bits 32] [--num_train 2000]
          [--epochs 10] [--sigma 0.5] [--crop_augment 0.3,1.0]
Runtime:  a few minutes on 2 CPU cores (one base model, then coding 11,000 canvases and
          their crops).
Prints:   the base model's mAP; the fraction of the training images' fixed crops whose
          keep reward (``jhash.losses.keep_rewards`` against every other training image,
          balanced weights, the base's pair loss on codes) is positive, and the mean
          reward; recall / precision within radius 0 and 2 and mAP of the database coded
          by the base alone and with every distinct crop code kept (``xi`` -> 0).
Protocol: the canvases of ``experiments/configs/mch.py`` with ``num_train`` training
          canvases, seed 0.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from experiments import _cli

import jhash
from jhash import data as jdata
from jhash import losses
from jhash.methods import mch_parts

_BASE = flags.DEFINE_string("base", "dch", "A pairwise base model: ksh, hashnet, dch, mmhh.")
_BITS = flags.DEFINE_integer("bits", 32, "Code length.")
_TRAIN = flags.DEFINE_integer("num_train", 2000, "Training canvases.")
_EPOCHS = flags.DEFINE_integer("epochs", 10, "Epochs of the base model.")
_SIGMA = flags.DEFINE_float("sigma", 0.5, "Side ratio of the fixed crops.")
_AUGMENT = flags.DEFINE_string("crop_augment", "", "low,high: train the base with crops.")


#: The base models the script takes (pairwise, with a coder and a pair loss on codes).
BASES = ("ksh", "hashnet", "dch", "mmhh")
#: The protocol's sizes: canvases of 2 x 2 Fashion-MNIST cells (side 56), of which
#: 1000 are queries; the training canvases come from the other 9000.
NUM_ITEMS, NUM_QUERIES, SIDE = 10000, 1000, 56
#: The longest code ``--bits`` takes. The paper's lengths are 16 to 64; the rewards read
#: a pair-loss table built from K + 1 codes of K bits (``losses.code_loss_table``), 4 K
#: (K + 1) bytes: 4 MB at 1,024 bits, 40 GB at 100,000.
MAX_BITS = 1024
#: The base model's batch size; with ``--epochs``, it sets the training steps, which JAX
#: counts in int32.
BATCH_SIZE = 64
MAX_STEPS = 2**31 - 1


def check_arguments(argv) -> tuple:
  """``(base, augment)``: the base model built from the flags and ``--crop_augment`` as
  ``(low, high)`` or None; a ValueError naming the flag for a bad one (checked before
  the data load and the training, which take minutes)."""
  if len(argv) > 1:
    raise ValueError(f"unexpected arguments: {' '.join(argv[1:])} (the script takes flags only)")
  if _BASE.value not in BASES:
    raise ValueError(
      f"--base {_BASE.value!r}: expected one of {', '.join(BASES)} (a pairwise base model)"
    )
  if not 1 <= _BITS.value <= MAX_BITS:
    raise ValueError(
      f"--bits {_BITS.value}: must be an int in [1, {MAX_BITS}] (the reward table grows as "
      "bits squared: 4 MB at 1,024 bits, 40 GB at 100,000)"
    )
  most = NUM_ITEMS - NUM_QUERIES
  if not 2 <= _TRAIN.value <= most:
    raise ValueError(
      f"--num_train {_TRAIN.value}: must be in [2, {most}] (the canvases that are not queries)"
    )
  _check_epochs(_EPOCHS.value, _TRAIN.value)
  if not 1.0 / SIDE <= _SIGMA.value <= 1.0:  # a crop of at least one pixel, at most the image
    raise ValueError(
      f"--sigma {_SIGMA.value}: must be in [{1.0 / SIDE:.4g}, 1] (the canvases are {SIDE} "
      "pixels a side; a smaller ratio cuts crops of less than a pixel)"
    )
  augment = None
  if _AUGMENT.value:
    parts = _AUGMENT.value.split(",")
    try:
      augment = tuple(float(v) for v in parts)
    except ValueError:
      augment = ()
    if len(augment) != 2:
      raise ValueError(
        f"--crop_augment {_AUGMENT.value!r}: expected two numbers low,high (e.g. 0.3,1.0)"
      )
  options = {"crop_augment": augment} if augment else {}
  try:
    base = jhash.methods.REGISTRY[_BASE.value](
      _BITS.value, batch_size=BATCH_SIZE, num_epochs=_EPOCHS.value, **options
    )
  except ValueError as error:
    flag = next(
      (
        f
        for name, f in (
          ("crop_augment", "--crop_augment"),
          ("num_bits", "--bits"),
          ("num_epochs", "--epochs"),
        )
        if name in str(error)
      ),
      "--base",
    )
    raise ValueError(f"{flag}: {error}") from None
  return base, augment


def _check_epochs(epochs: int, num_train: int) -> None:
  """``--epochs``: at least 0, and few enough that the training steps fit int32."""
  most = MAX_STEPS // -(-num_train // BATCH_SIZE)
  if not 0 <= epochs <= most:
    raise ValueError(
      f"--epochs {epochs}: must be an int in [0, {most}] for --num_train {num_train} (the "
      f"training steps, epochs x ceil(num_train / {BATCH_SIZE}), must fit JAX's int32)"
    )


def crop_codes(base, state, batch, sigma, chunk=500):
  """int8 [n, 5, K]: the base model's codes of each image's five fixed crops."""
  coder = base.extras.coder
  x = coder.read(batch)
  out = []
  for i in range(0, x.shape[0], chunk):
    crops = mch_parts.five_crops(x[i : i + chunk], sigma)
    n = crops.shape[0]
    logits = coder.outputs(state.coder, crops.reshape((n * 5,) + crops.shape[2:])).logits
    out.append(np.asarray(jhash.codes.sign(logits)).reshape(n, 5, -1))
  return np.concatenate(out)


def main(argv) -> None:
  from experiments import harness

  try:
    base, augment = check_arguments(argv)
  except ValueError as error:
    sys.exit(harness.script_error(error))
  train, query, database = jdata.load_protocol(
    "canvases",
    0,
    num_items=NUM_ITEMS,
    num_queries=NUM_QUERIES,
    num_train=_TRAIN.value,
    grid=(2, 2),
    num_objects=(1, 3),
    images=True,
  )
  state, _ = jhash.fit(base, jax.random.key(0), train, progress=False)
  labels = jnp.asarray(train["labels"])
  codes = jnp.asarray(jhash.encode(base, state, train), jnp.float32)
  crops = jnp.asarray(crop_codes(base, state, train, _SIGMA.value), jnp.float32)
  similarity = losses.label_similarity(labels, labels)
  weights = losses.balanced_pair_weights(similarity, losses.off_diagonal(labels.shape[0]))
  table = base.extras.code_loss(state)
  rewards = np.stack(
    [
      np.asarray(losses.keep_rewards(codes, crops[:, j], codes, similarity, weights, table))
      for j in range(5)
    ],
    1,
  )
  print(
    f"{_BASE.value}, {_BITS.value} bits, crop_augment={augment}: positive keep rewards "
    f"{np.mean(rewards > 0):.4f} of the crops, mean reward {rewards.mean():.5f}"
  )
  q = jhash.encode(base, state, query)
  single = np.asarray(jhash.encode(base, state, database))
  multi = np.concatenate([single[:, None], crop_codes(base, state, database, _SIGMA.value)], 1)
  mask = np.asarray(mch_parts.dedupe_mask(jnp.asarray(multi), jnp.ones(multi.shape[:2], bool)))
  ql, dl = query["labels"], database["labels"]
  for name, db, kw in (("base alone", single, {}), ("every crop kept", multi, {"db_mask": mask})):
    pr = jhash.metrics.pr_curve_by_radius(q, db, ql, dl, **kw)
    m = float(jhash.metrics.mean_average_precision(q, db, ql, dl, **kw))
    print(
      f"{name}: R@r0 {pr['recall'][0]:.4f} P@r0 {pr['precision'][0]:.4f} "
      f"R@r2 {pr['recall'][2]:.4f} P@r2 {pr['precision'][2]:.4f} mAP {m:.4f} "
      f"codes per item {mask.sum(1).mean() if kw else 1.0:.3f}"
    )


if __name__ == "__main__":
  _cli.run(main)

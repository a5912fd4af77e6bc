"""Many seeds of DCH: one ``vmap`` of ``jhash.make_train`` against sequential ``jhash.fit``.

Command: ``python benchmarks/bench_seeds.py`` (about 5-10 minutes on 2 CPU cores);
``--quick`` runs 2 seeds on fewer images and only prints. The full run writes the
``## Seeds of DCH: vmap(make_train) and sequential fit`` section of
``benchmarks/RESULTS.md`` (only that section is replaced) and prints it.

Data: Fashion-MNIST under ``jhash.data.load_protocol("fashion-mnist", seed=0,
images=True, train_per_class=200)``: 2,000 training images [28, 28]. Method:
``jhash.methods.dch(32, batch_size=64, num_epochs=2)`` (SmallCNN, Adam 1e-3), 62 steps
per seed. Seeds: ``jax.random.split(jax.random.key(0), 8)``.

* The peer: ``jhash.fit(method, key, train, progress=False)`` once per seed, one after the
  other, as a researcher loops over seeds; fit runs each seed's steps in one compiled loop
  (compiled once, for the first seed).
* ``vmap``: ``jax.jit(jax.vmap(jhash.make_train(method, train), in_axes=(0, None)))(keys,
  train)``, every seed in one compiled program.

Two timings of each: the first call (compilation included: what a script pays once) and
the median of later calls (compiled: what a sweep in a long session pays), interleaved.
Both use every core this process may use (XLA's CPU thread pool). The check column: the
largest difference between a seed's losses under ``vmap`` and under ``fit`` (rounding
differences of the batched program, grown over the steps of training; ``jit(train)`` of
one seed equals ``fit`` to the bit, tested in ``tests/test_train.py``).
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import jhash
import jhash.data
from _report import block, interleaved, table, write_section

SECTION = "Seeds of DCH: vmap(make_train) and sequential fit"


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="2 seeds, 500 images; print only")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  seeds, per_class = (2, 50) if args.quick else (8, 200)
  train, _, _ = jhash.data.load_protocol(
    "fashion-mnist", seed=0, images=True, train_per_class=per_class
  )
  method = jhash.methods.dch(32, batch_size=64, num_epochs=2)
  keys = jax.random.split(jax.random.key(0), seeds)

  def fits():
    return [jhash.fit(method, k, train, progress=False) for k in keys]

  vmapped = jax.jit(jax.vmap(jhash.make_train(method, train), in_axes=(0, None)))

  def together():
    return vmapped(keys, train)

  first = {}
  for name, fn in (("sequential fit", fits), ("vmap(make_train)", together)):
    t0 = time.perf_counter()
    out = block(fn())
    first[name] = time.perf_counter() - t0
    if name == "sequential fit":
      fit_losses = np.stack([np.asarray(h["loss"]) for _, h in out])
    else:
      vmap_losses = np.asarray(out[1]["loss"])
  warm = interleaved({"sequential fit": fits, "vmap(make_train)": together}, args.repeats)
  difference = float(np.max(np.abs(fit_losses - vmap_losses)))
  steps = fit_losses.shape[1]
  rows = [
    [name, f"{first[name]:.2f}", f"{warm[name]:.3f}", f"{seeds * steps / warm[name]:.0f}"]
    for name in first
  ]
  rows.append(
    [
      "ratio (fit / vmap)",
      f"{first['sequential fit'] / first['vmap(make_train)']:.2f}x",
      f"{warm['sequential fit'] / warm['vmap(make_train)']:.2f}x",
      "",
    ]
  )
  body = (
    f"{seeds} seeds of `jhash.methods.dch(32, batch_size=64, num_epochs=2)` on "
    f"{train['labels'].shape[0]:,} Fashion-MNIST training images ({steps} steps per seed). "
    f"Seconds for all seeds: the first call (compilation included) and the median of "
    f"{args.repeats} later calls, interleaved. Ratio > 1: vmap faster. Largest difference "
    f"between a seed's losses under vmap and under fit: {difference:.2e} (rounding "
    f"differences of the batched program, grown over {steps} steps of training). vmap "
    f"turns each seed's convolutions and matrix products into batched ones: an "
    f"accelerator runs them at once, where a CPU of few cores has no idle units to fill "
    f"and may run the batched convolutions slower than the seeds' one by one.\n\n"
    + table(["how", "first call (s)", "compiled (s)", "steps/s (compiled)"], rows)
  )
  if args.quick:
    print(body)
  else:
    write_section(SECTION, "python benchmarks/bench_seeds.py", body)


if __name__ == "__main__":
  main()

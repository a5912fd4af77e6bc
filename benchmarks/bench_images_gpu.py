"""The papers' setting on an accelerator: JPEGs in NUS-WIDE's list layout into a ResNet-18.

Command, from the repository root with jhash installed (``./install.sh bench``, plus the
``images`` extra): ``python benchmarks/bench_images_gpu.py`` (a few minutes on one GPU;
``--quick``: a CPU-sized smoke run, prints only). Part of ``benchmarks/accelerator.sh``.

Data: ``--images`` synthetic 256 x 256 JPEGs (smooth colour waves, quality 90) written to a
temporary folder with ``train.txt``, ``test.txt`` and ``database.txt`` in the toolboxes'
NUS-WIDE layout (a path and 21 multi-hot labels per line), read back by
``jhash.data.load_paper_lists("nuswide_21", root)``. Rows, each images per second:

* the pipeline alone: ``jhash.data.image_pipeline`` with the training transforms (resize
  to 256, random 224 x 224 crop, flip, ImageNet normalisation), batch 64, its default
  read threads (the host's cores);
* DCH's train step (``jhash.methods.dch(32)``, ResNet-18 with the ImageNet stem at 224 x
  224, batch 64, Adam): one jitted update on a fixed device minibatch (the chip alone),
  and ``jhash.fit`` fed by the pipeline (reading, the host-to-device copy and the step);
* PyTorch on the same device, where torch (and torchvision) import: torchvision's
  ``resnet18`` with a 32-wide last layer, the same DCH loss line by line
  (``bench_train.torch_dch_loss``) with multi-hot pair similarities, Adam, on a fixed
  minibatch; float32 (TF32 as torch's default for convolutions);
* encoding: ``jhash.encode`` of the database images in evaluation mode;
* CDH's exact B-step (issue: past one process): one matrix-free sweep
  (``cdh_parts.bstep_sweep(matrix_free=True)``) at ``--cdh-items`` (186,000, NUS-WIDE's
  training size) random 32-bit codes with ten classes.

* MCH's agent step: ``jhash.methods.mch`` over that DCH, one jitted update of the agent
  phase on the fixed minibatch (the base network coding the image and its five crops,
  the policy's REINFORCE step), and ``jhash.encode_multi`` of the database (up to six
  codes an image);

Writes the ``## Images into a ResNet-18, and CDH's exact B-step`` section of
``benchmarks/RESULTS.md``, titled with the backend.
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import jhash
import jhash.data
from jhash.methods import cdh_parts

import _report

SECTION = "## Images into a ResNet-18, and CDH's exact B-step"
BATCH, BITS, SIDE = 64, 32, 256


def write_list_set(root: pathlib.Path, n: int, side: int, rng) -> None:
  """``n`` JPEGs and NUS-WIDE's three list files (all images in each list)."""
  from PIL import Image  # pylint: disable=import-outside-toplevel

  (root / "images").mkdir(parents=True)
  yy, xx = np.mgrid[0:side, 0:side] / side
  lines = []
  for i in range(n):
    f = rng.uniform(1, 6, 3)
    image = np.stack([np.sin(2 * np.pi * (f[c] * xx + yy * c)) for c in range(3)], -1)
    pixels = np.clip(127 + 100 * image + rng.normal(0, 8, image.shape), 0, 255)
    Image.fromarray(pixels.astype(np.uint8)).save(root / "images" / f"{i}.jpg", quality=90)
    labels = (rng.random(21) < 0.15).astype(int)
    labels[rng.integers(21)] = 1
    lines.append(f"images/{i}.jpg " + " ".join(map(str, labels)))
  for name in ("train.txt", "test.txt", "database.txt"):
    (root / name).write_text("\n".join(lines) + "\n")


def rate(fn, images_per_call: int, repeats: int) -> float:
  """Images per second: the median call after one warm-up call."""
  jax.block_until_ready(fn())
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - t0)
  return images_per_call / float(np.median(times))


def pipeline(train, steps: int, image_size: int):
  """The training pipeline over ``train``'s images: ``steps`` minibatches of ``BATCH``."""
  return jhash.data.image_pipeline(
    train.paths,
    train.labels,
    batch_size=BATCH,
    key=jax.random.key(0),
    train=True,
    num_steps=steps,
    image_size=image_size,
  )


def pipeline_rate(train, steps: int, image_size: int) -> float:
  def read():
    for _ in pipeline(train, steps, image_size):
      pass

  return rate(read, steps * BATCH, 2)


def jhash_rates(train, steps: int, image_size: int) -> dict:
  net = jhash.models.backbone((image_size, image_size, 3), BITS, stem="imagenet")
  method = jhash.methods.dch(BITS, backbone=net, batch_size=BATCH)
  pipe = lambda n: pipeline(train, n, image_size)
  first = next(iter(pipe(1)))
  state = jhash.init(method, jax.random.key(0), first)
  update = jax.jit(method.phases[0].update, donate_argnums=0)
  batch = jax.device_put(first)
  holder = {"state": state}

  def step():
    holder["state"], metrics = update(holder["state"], batch, jax.random.key(1))
    return metrics["loss"]

  out = {"step": rate(step, BATCH, max(3, steps))}
  out["fit"] = rate(
    lambda: jhash.fit(method, jax.random.key(0), pipe(steps), num_steps=steps, progress=False)[0],
    steps * BATCH,
    2,
  )
  database = {"views": (np.concatenate([first["views"][0]] * 4),)}
  out["encode"] = rate(lambda: jhash.encode(method, holder["state"], database), 4 * BATCH, 3)
  out.update(mch_rates(method, first, database, steps))
  return out


def mch_rates(base, first, database, steps: int) -> dict:
  """MCH over ``base``: its agent's step on ``first`` and ``encode_multi`` of ``database``."""
  method = jhash.methods.mch(base, agent_batch_size=BATCH)
  holder = {"state": jhash.init(method, jax.random.key(0), first)}
  update = jax.jit(method.phases[-1].update, donate_argnums=0)
  batch = jax.device_put(first)

  def step():
    holder["state"], metrics = update(holder["state"], batch, jax.random.key(1))
    return metrics["agent_loss"]

  return {
    "agent": rate(step, BATCH, max(3, steps)),
    "encode_multi": rate(
      lambda: jhash.encode_multi(method, holder["state"], database), len(database["views"][0]), 3
    ),
  }


def torch_rate(train, steps: int, image_size: int) -> float | None:
  try:
    import torch  # pylint: disable=import-outside-toplevel
    import torchvision  # pylint: disable=import-outside-toplevel
    from bench_train import torch_dch_loss  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  device = "cuda" if torch.cuda.is_available() else "cpu"
  net = torchvision.models.resnet18(num_classes=BITS).to(device)
  opt = torch.optim.Adam(net.parameters(), lr=1e-3)
  x = torch.randn(BATCH, 3, image_size, image_size, device=device)
  labels = torch.from_numpy(np.asarray(train.labels[:BATCH], np.float32)).to(device)
  s = (labels @ labels.T > 0).float()
  mask = 1.0 - torch.eye(BATCH, device=device)
  total, similar = mask.sum(), (mask * s).sum()
  w = mask * (
    s * total / (2 * similar.clamp(min=1)) + (1 - s) * total / (2 * (total - similar).clamp(min=1))
  )

  def step():
    u = net(x)
    loss = torch_dch_loss(u, u, s, w)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if device == "cuda":
      torch.cuda.synchronize()

  return rate(step, BATCH, max(3, steps))


def cdh_sweep_seconds(n: int) -> float:
  rng = np.random.default_rng(0)
  codes = jnp.asarray(np.where(rng.random((n, BITS)) < 0.5, 1, -1).astype(np.int8))
  z = jnp.asarray((rng.random((n, BITS)) - 0.5).astype(np.float32))
  sup = cdh_parts.supervision_from_labels(jnp.asarray(np.arange(n) % 10, jnp.int32))
  uniforms = jnp.asarray(rng.random((BITS, 16)).astype(np.float32))
  sweep = jax.jit(
    lambda c, zz, s, u: cdh_parts.bstep_sweep(c, zz, s, jnp.float32(1e-4), u, matrix_free=True)
  )
  compiled = sweep.lower(codes, z, sup, uniforms).compile()
  t0 = time.perf_counter()
  jax.block_until_ready(compiled(codes, z, sup, uniforms))
  return time.perf_counter() - t0


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="CPU-sized smoke run; prints only")
  parser.add_argument("--images", type=int, default=1024)
  parser.add_argument("--steps", type=int, default=10)
  parser.add_argument("--cdh-items", type=int, default=186_000)
  args = parser.parse_args()
  image_size, steps, cdh_items, n = 224, args.steps, args.cdh_items, args.images
  if args.quick:
    image_size, steps, cdh_items, n = 64, 2, 2_000, 2 * BATCH
  rng = np.random.default_rng(0)
  with tempfile.TemporaryDirectory() as tmp:
    write_list_set(pathlib.Path(tmp), n, SIDE if not args.quick else 72, rng)
    train = jhash.data.load_paper_lists("nuswide_21", tmp).train
    rows = {"pipeline": pipeline_rate(train, steps, image_size)}
    rows.update(jhash_rates(train, steps, image_size))
    rows["torch"] = torch_rate(train, steps, image_size)
  cdh = cdh_sweep_seconds(cdh_items)
  device = f"{jax.default_backend()} ({jax.devices()[0].device_kind})"
  torch_row = "not installed" if rows["torch"] is None else f"{rows['torch']:,.0f}"
  text = "\n".join(
    [
      SECTION,
      "",
      f"Command: `python benchmarks/bench_images_gpu.py{' --quick' if args.quick else ''}`. "
      f"Device: {device}; host: {_report.cores()} cores ({_report.cpu_model()}); "
      f"jax {jax.__version__}; {time.strftime('%Y-%m-%d', time.gmtime())}.",
      "",
      f"{n:,} synthetic JPEGs in NUS-WIDE's list layout, {image_size} x {image_size} crops, "
      f"batch {BATCH}, {BITS} bits; images per second (median after a warm-up).",
      "",
      "| row | images / s |",
      "|---|---|",
      f"| `image_pipeline`, training transforms | {rows['pipeline']:,.0f} |",
      f"| DCH train step, ResNet-18, jhash (one jitted update) | {rows['step']:,.0f} |",
      f"| DCH train step, ResNet-18, PyTorch (same device) | {torch_row} |",
      f"| `jhash.fit` fed by the pipeline | {rows['fit']:,.0f} |",
      f"| `jhash.encode` (evaluation mode) | {rows['encode']:,.0f} |",
      f"| MCH's agent step over that DCH (image and five crops coded) | {rows['agent']:,.0f} |",
      f"| MCH's `jhash.encode_multi` (up to six codes an image) | {rows['encode_multi']:,.0f} |",
      "",
      f"CDH's exact B-step: one matrix-free sweep over {cdh_items:,} random {BITS}-bit codes "
      f"(ten classes): {cdh:.1f} s.",
      "",
    ]
  )
  print(text)
  if not args.quick:
    _report.replace_section(text)


if __name__ == "__main__":
  main()

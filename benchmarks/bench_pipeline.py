"""Decoding and augmenting images: the Grain pipeline, jhash's threads and PyTorch's loader.

Command: ``python benchmarks/bench_pipeline.py`` (about 2-3 minutes on 2 busy cores);
``--quick`` runs a smoke version (fewer files, one repeat) and only prints. The full run
writes the ``## Image pipeline: Grain, jhash's threads and PyTorch's DataLoader`` section
of ``benchmarks/RESULTS.md`` (only that section is replaced) and prints it.

Data: ``--files`` synthetic JPEGs of 500 x 375 (W x H, a common size in the papers'
image sets), quality 90, written to a temporary folder: smooth random colour waves with
mild noise (synthetic: a photo's JPEG may decode at another speed). Each file is read
once per run, in minibatches of 32.

Rows (images per second, and per core: divided by the threads or processes decoding,
at most the cores this process may use):

* ``image_pipeline`` (Grain), training transforms: resize the shorter side to 256, random
  224 x 224 crop, horizontal flip, ImageNet normalisation, float32; on 1 and 2 threads of
  this process, and on 1 and 2 Grain worker processes (one thread each);
* the same with ``resize=(224, 224)`` (the crop is then the whole image): about
  ``image_stream``'s work (one resize to 224 x 224) plus a flip and the normalisation, to
  compare the two ways of scheduling the reads on nearly the same work;
* ``image_stream`` (jhash's hand-written threads) reading the same files straight to
  224 x 224 (bilinear resize, float32 pixels / 255): no crop, no flip, no normalisation;
  on 1 and 2 threads;
* PyTorch's ``DataLoader`` over a ``Dataset`` that opens each file with PIL and applies
  torchvision's ``Resize(256)``, ``RandomHorizontalFlip()``, ``RandomCrop(224)``,
  ``ToTensor()``, ``Normalize(ImageNet)`` (DeepHash-pytorch's training transform), with
  0 workers (the main process, 1 torch thread) and with 1 and 2 worker processes (its
  default start method). Only when torch and torchvision import; neither is a
  dependency of jhash (``pip install torch torchvision``).

Timing: each run starts a fresh iterator and reads every file once; its clock starts when
the first minibatch arrives, with worker processes when each worker has delivered one (so
start-up is left out; the time to the first minibatch is reported apart) and stops at
the last. Runs alternate between rows, the order reversed every other repeat; medians
over repeats. Ratios: medians over repeats of a row's rate over the PyTorch row with the
same number of cores in the same repeat (the main process for one, 2 workers for two),
and over ``image_stream``'s with the same threads. Check in the same run: Grain's evaluation minibatch equals torchvision's
``Resize(256)``, ``CenterCrop(224)``, ``ToTensor()``, ``Normalize`` on the same files.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch's OpenMP starts

import _report  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from jhash.data import ImageList  # noqa: E402
from jhash.data import image_stream  # noqa: E402

from jhash.data import image_pipeline  # noqa: E402

BATCH = 32
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet, as the peers
SECTION = "Image pipeline: Grain, jhash's threads and PyTorch's DataLoader"


def write_jpegs(folder: pathlib.Path, count: int, seed: int = 0) -> list[str]:
  """``count`` smooth random 500 x 375 JPEGs (quality 90); returns their paths."""
  rng = np.random.default_rng(seed)
  rows, cols = np.mgrid[0:375, 0:500].astype(np.float32)
  paths = []
  for i in range(count):
    pixels = np.zeros((375, 500, 3), np.float32)
    for _ in range(4):  # a few random colour waves
      fy, fx = rng.uniform(0.002, 0.04, 2)
      phase = rng.uniform(0, 2 * np.pi)
      pixels += rng.uniform(20, 60, 3) * np.sin(fy * rows + fx * cols + phase)[..., None]
    pixels += 128 + rng.normal(0, 6, pixels.shape)
    path = folder / f"{i:04d}.jpg"
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)
    paths.append(str(path))
  return paths


def timed(make_iterator, skip: int) -> tuple[float, float, int]:
  """(seconds to the first minibatch, seconds from the ``skip``-th to the last, images
  read after the ``skip``-th)."""
  t0 = time.perf_counter()
  it = make_iterator()
  try:
    next(it)
    t1 = time.perf_counter()
    for _ in range(skip - 1):
      next(it)
    t2 = time.perf_counter()
    images = 0
    for minibatch in it:
      images += len(_first_view(minibatch))
    t3 = time.perf_counter()
  finally:
    if hasattr(it, "close"):
      it.close()
  return t1 - t0, t3 - t2, images


def _first_view(minibatch):
  if isinstance(minibatch, dict):
    return minibatch["views"][0]
  return minibatch[0]  # torch: (images, labels)


def grain_rows(paths, labels, key) -> dict:
  def run(threads, workers, resize=256):
    def make():
      pipeline = image_pipeline(
        paths,
        labels,
        batch_size=BATCH,
        key=key,
        train=True,
        num_epochs=1,
        resize=resize,
        process_index=0,
        process_count=1,
        worker_count=workers,
        read_threads=threads,
      )
      return iter(pipeline)

    return make

  same = "Grain `image_pipeline`, resize to (224, 224), whole-image crop"
  return {
    "Grain `image_pipeline`, 1 thread": (run(1, 0), 1, 1),
    "Grain `image_pipeline`, 2 threads": (run(2, 0), 2, 1),
    "Grain `image_pipeline`, 1 worker process": (run(1, 1), 1, 1),
    "Grain `image_pipeline`, 2 worker processes": (run(1, 2), 2, 2),
    f"{same}, 1 thread": (run(1, 0, (224, 224)), 1, 1),
    f"{same}, 2 threads": (run(2, 0, (224, 224)), 2, 1),
  }


def stream_rows(paths, labels, key) -> dict:
  listing = ImageList(paths, labels)
  steps = len(paths) // BATCH

  def run(threads):
    def make():
      stream = image_stream(
        listing, BATCH, key, steps, size=(224, 224), dtype=np.float32, num_threads=threads
      )
      return iter(stream)

    return make

  return {
    "jhash `image_stream` (resize to (224, 224), no crop/flip), 1 thread": (run(1), 1, 1),
    "jhash `image_stream` (resize to (224, 224), no crop/flip), 2 threads": (run(2), 2, 1),
  }


def torch_rows(paths):
  """PyTorch's rows, or (None, why) when torch or torchvision does not import."""
  try:
    import torch
    from torchvision import transforms
  except Exception as e:  # not installed, or a torchvision built for another torch
    return None, f"{type(e).__name__}: {e}"
  torch.set_num_threads(1)
  train = transforms.Compose(
    [
      transforms.Resize(256),
      transforms.RandomHorizontalFlip(),
      transforms.RandomCrop(224),
      transforms.ToTensor(),
      transforms.Normalize(MEAN, STD),
    ]
  )
  dataset = _TorchImages(paths, train)

  def run(workers):
    def make():
      loader = torch.utils.data.DataLoader(
        dataset, batch_size=BATCH, shuffle=True, num_workers=workers, drop_last=True
      )
      return iter(loader)

    return make

  rows = {
    "PyTorch `DataLoader` + torchvision, main process": (run(0), 1, 1),
    "PyTorch `DataLoader` + torchvision, 1 worker process": (run(1), 1, 1),
    "PyTorch `DataLoader` + torchvision, 2 worker processes": (run(2), 2, 2),
  }
  return rows, f"torch {torch.__version__}, torchvision {_torchvision_version()}"


class _TorchImages:
  """DeepHash-pytorch's ``ImageList``: ``(transform(PIL image), index)`` per item."""

  def __init__(self, paths, transform):
    self.paths, self.transform = paths, transform

  def __len__(self):
    return len(self.paths)

  def __getitem__(self, i):
    with Image.open(self.paths[i]) as image:
      return self.transform(image.convert("RGB")), i


def _torchvision_version():
  import torchvision

  return torchvision.__version__


def check_against_torchvision(paths, key) -> str:
  """Grain's evaluation minibatch against torchvision's evaluation transform."""
  try:
    from torchvision import transforms
  except Exception:
    return "Grain evaluation == torchvision evaluation transform: not checked (no torchvision)"
  peer = transforms.Compose(
    [
      transforms.Resize(256),
      transforms.CenterCrop(224),
      transforms.ToTensor(),
      transforms.Normalize(MEAN, STD),
    ]
  )
  ours = next(iter(image_pipeline(paths[:8], None, batch_size=8, key=key, train=False)))
  worst = 0.0
  for i, path in enumerate(paths[:8]):
    with Image.open(path) as image:
      want = peer(image.convert("RGB")).permute(1, 2, 0).numpy()
    worst = max(worst, float(np.abs(ours["views"][0][i] - want).max()))
  verdict = "ok (identical)" if worst == 0 else f"max abs difference {worst:.2e}"
  return f"Grain evaluation minibatch == torchvision's evaluation transform (8 files): {verdict}"


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="a smoke run; prints only")
  parser.add_argument("--files", type=int, default=256, help="JPEG files (default 256)")
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  files, repeats = (96, 1) if args.quick else (args.files, args.repeats)
  warnings.filterwarnings("ignore", message=".*os.fork\\(\\) was called.*")
  key = jax.random.key(0)
  cores = _report.cores()
  with tempfile.TemporaryDirectory(prefix="jhash-bench-images-") as folder:
    t0 = time.perf_counter()
    paths = write_jpegs(pathlib.Path(folder), files)
    sizes = [os.path.getsize(p) for p in paths]
    print(
      f"{files} JPEGs written in {time.perf_counter() - t0:.1f} s, median "
      f"{statistics.median(sizes) / 1024:.0f} KiB",
      flush=True,
    )
    labels = np.eye(4, dtype=bool)[np.arange(files) % 4]
    rows = grain_rows(paths, labels, key) | stream_rows(paths, labels, key)
    torch_result, torch_note = torch_rows(paths)
    if torch_result is not None:
      rows |= torch_result
    load = [os.getloadavg()[0]]
    first = {name: [] for name in rows}
    rates = {name: [] for name in rows}
    for r in range(repeats):
      order = list(rows) if r % 2 == 0 else list(reversed(rows))
      for name in order:
        make, _, skip = rows[name]
        start, seconds, images = timed(make, skip)
        first[name].append(start)
        rates[name].append(images / seconds)
        print(
          f"  repeat {r}: {name}: {images / seconds:.0f} images/s (first minibatch {start:.2f} s)",
          flush=True,
        )
    load.append(os.getloadavg()[0])
    check = check_against_torchvision(paths, key)
    size_note = f"median file {statistics.median(sizes) / 1024:.0f} KiB"
  table_rows = []
  torch_peer = {1: "PyTorch `DataLoader` + torchvision, main process"}
  torch_peer[2] = "PyTorch `DataLoader` + torchvision, 2 worker processes"
  stream = "jhash `image_stream` (resize to (224, 224), no crop/flip)"
  stream_peer = {1: f"{stream}, 1 thread", 2: f"{stream}, 2 threads"}

  def ratio(name, peers, used):
    peer = peers.get(used)
    if peer not in rates or peer == name:
      return ""
    return f"x{statistics.median(a / b for a, b in zip(rates[name], rates[peer])):.2f}"

  for name, (_, used, _) in rows.items():
    rate = statistics.median(rates[name])
    table_rows.append(
      [
        name,
        f"{rate:,.0f}",
        f"{rate / min(used, cores):,.0f}",
        f"{statistics.median(first[name]):.2f} s",
        ratio(name, torch_peer, used),
        ratio(name, stream_peer, used) if "worker" not in name else "",
      ]
    )
  header = [
    "row",
    "images/s",
    "images/s per core",
    "first minibatch",
    "/ PyTorch, same cores",
    "/ `image_stream`, same threads",
  ]
  body = (
    f"CPU: {_report.cpu_model()}; {cores} cores. {files} synthetic JPEGs of 500 x 375 "
    f"({size_note}), minibatches of {BATCH}, 224 x 224 x 3 float32 out; median of "
    f"{repeats} interleaved repeats (the order reversed every other one), each reading "
    f"every file once, timed from its first minibatch (with worker processes, from when "
    f"each worker has delivered one) to its last. Load average (1 min) "
    f"{load[0]:.1f} at the start, {load[1]:.1f} at the end (a shared machine: compare the "
    f"ratios, measured in the same repeats, not the rates). "
    + (
      f"PyTorch: {torch_note}."
      if torch_result is not None
      else f"PyTorch rows left out: {torch_note}."
    )
    + "\n\n"
    + _report.table(header, table_rows)
    + f"\n\nChecks in the same run: {check}.\n\n"
    "Notes. Training transforms everywhere but `image_stream` (no crop, no flip, no "
    "normalisation: it resizes straight to 224 x 224, so it does less work; the Grain rows "
    "resizing to (224, 224) do about the same work). Per core: "
    "images/s over the threads or processes decoding (at most the cores). The worker "
    "rows leave their start-up out of the rate (Grain spawns its workers, each importing "
    'jhash, JAX and Grain: the "first minibatch" column; PyTorch forks them).\n'
  )
  if max(load) > cores:
    body += (
      f"With a load average above the {cores} cores, the rows on several threads or "
      "processes had no idle core to gain from: their speed-ups over one are not "
      "measured by this run.\n"
    )
  command = "python benchmarks/bench_pipeline.py"
  if args.quick:
    print(f"## {SECTION}\n\n{body}")
  else:
    _report.write_section(SECTION, command, body)


if __name__ == "__main__":
  main()

"""Training the small CNN hashing network: jhash against the same network and DCH in PyTorch.

Command: ``python benchmarks/bench_train.py`` (about 3-5 minutes on 2 busy CPU cores);
``--quick`` runs a smoke version (1,000 training images, a database of 5,000, 1 epoch,
2 repeats) and only prints. The full run writes the ``## Small CNN training: jhash and
PyTorch`` section of ``benchmarks/RESULTS.md`` (only that section is replaced, with
``benchmarks/_report.py``) and prints it.

PyTorch is a benchmark extra, never a dependency of jhash or of its tests. Here it was
installed with ``pip install torch==2.14.1 torchvision==0.29.1`` (the default wheels are
the CUDA build, several GB with the ``nvidia-*`` packages); this benchmark runs it on the
CPU. Before importing torch the script sets ``OMP_WAIT_POLICY=PASSIVE`` unless the
environment sets it: with OpenMP's default (busy waiting), torch at 2 threads on a
machine whose cores are shared with other work ran 10-20 times slower than at 1 thread
(its threads spin at each barrier while the other is descheduled); passive waiting
removes that collapse and is the fairest setting for the peer here.

Data: Fashion-MNIST under ``jhash.data.load_protocol("fashion-mnist", seed=0,
images=True)``: 1,000 queries (100 per class), 5,000 training images (500 per class)
drawn from the database of the other 69,000; pixels / 255 as images [n, 28, 28].

1. Train-step throughput (images per second), batch 128, on the same machine in the
   same run, interleaved (each repeat runs every row back to back):

   * jhash, one step: ``jax.jit(method.update, donate_argnums=0)`` of
     ``method = jhash.methods.dch(32, batch_size=128)`` (``jhash.models.SmallCNN``
     defaults on 28 x 28 x 1, 32 bits; in-batch pairs with balanced pair weights;
     ``jhash.losses.dch_loss`` defaults; Adam 1e-3), one jitted call per step on a fixed
     minibatch of 128 training images;
   * jhash, the loop as ``jhash.fit`` runs it: ``jhash.fit(method, key, train,
     num_steps=N, log_every=N, progress=False)`` with N = 200, timed after a warm-up
     call with the same N (so compilation is excluded; the same method object, so
     fit's compiled loop is reused): N steps inside one compiled ``lax.fori_loop`` over
     minibatches gathered on the device. The time includes fit's fixed per-call work
     (``init``, checks, copying the 5,000 images to the device);
   * PyTorch eager, the same network (``nn.Conv2d(k=3, stride=2, padding=1)`` 1 -> 16 ->
     32 channels, 28 -> 14 -> 7, ``nn.Linear`` 1,568 -> 128 -> 32, ReLU), the same
     standardisation of the pixels, pair similarities and balanced weights, a line-by-line
     transcription of ``dch_loss``, ``torch.optim.Adam(lr=1e-3)``, with
     ``torch.set_num_threads`` set to the cores available, and with 1 thread;
   * jhash, one step, with ``PatchesOnlySmallCNN``: every convolution the product of its
     patches and kernel, as ``SmallCNN`` computed it before ``StridedConv`` (the same
     parameters and function), to measure that change in the same run;
   * encoding the 5,000 training images (jhash in its default chunks of 256, PyTorch in
     chunks of 1,024), the pixels standardised inside the timing: ``jhash.encode`` with ``SmallCNN`` and with the patches-only network,
     and PyTorch's network in evaluation mode under ``torch.no_grad`` (both thread
     settings).

   Each repeat runs every row once (20 steps, or N for fit), in reverse order every
   other repeat. Speed-ups are medians over repeats of (jhash images/s) / (PyTorch
   images/s) in the same repeat; "best PyTorch" takes the faster of the two thread
   settings in each repeat.

2. End to end: ``jhash.methods.dch(32)`` with its defaults (batch 64, 20 epochs, Adam
   1e-3) fitted with ``jhash.fit`` on the 5,000 training images, against a plain PyTorch
   DCH (the same network, loss, standardisation, Adam, learning rate, batch size and
   number of epochs, ``n // batch`` minibatches per epoch as jhash, a fresh random order
   per epoch, PyTorch's default initialisation, the thread count that was faster in
   part 1). Both encode the 69,000 database images (chunks of 1,024) and the queries;
   mAP over the whole database with ``jhash.metrics.mean_average_precision`` (tie-aware)
   on both models' codes. Two rounds, interleaved: jhash's first call includes XLA's
   compilation (what a user waits for), its second reuses the compiled code.

3. Memory of the memory-bank variant ``jhash.methods.dch(32, memory=True)``: the bytes
   of its state (``sum(x.nbytes for x in jax.tree.leaves(state))``) against the plain
   method's, on the same training set.

Checks in the same run: the PyTorch loss equals ``jhash.losses.dch_loss`` (value and
gradient) on the same outputs, and the PyTorch network with jhash's initial parameters
and jhash's "same" padding (one row and column after, as ``strided_patches``) gives
jhash's logits; the timed PyTorch network pads one pixel on every side
(``padding=1``): the same shapes and work, windows shifted by one pixel.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch's OpenMP starts

import numpy as np  # noqa: E402

import _report  # noqa: E402
import jax  # noqa: E402
import flax.linen as fnn  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jhash  # noqa: E402
import jhash.data  # noqa: E402
import jhash.metrics  # noqa: E402
from jhash import losses as jlosses  # noqa: E402
from jhash import training  # noqa: E402

try:
  import torch  # noqa: E402
  import torch.nn.functional as F  # noqa: E402
  from torch import nn  # noqa: E402
except ImportError:  # pragma: no cover
  sys.exit("bench_train.py compares with PyTorch: pip install torch==2.14.1 torchvision==0.29.1")

TITLE = "Small CNN training: jhash and PyTorch"
CORES = _report.cores()
NUM_BITS = 32
SMALL = jhash.models.SmallCNN(NUM_BITS)  # its defaults: channels, dense width


# ----------------------------------------------------------------------------- PyTorch peer


class TorchSmallCNN(nn.Module):
  """jhash.models.SmallCNN in PyTorch: 3 x 3 stride-2 convolutions, ReLU, dense, head.

  ``same_padding=True`` pads as jhash's "same" (the extra row and column after) for the
  equivalence check; the timed network uses ``nn.Conv2d(padding=1)``.
  """

  def __init__(
    self,
    num_bits,
    channels=tuple(SMALL.channels),
    dense=SMALL.dense,
    in_channels=1,
    side=28,
    same_padding=False,
  ):
    super().__init__()
    self.same_padding = same_padding
    convs, c = [], in_channels
    for width in channels:
      convs.append(nn.Conv2d(c, width, 3, stride=2, padding=0 if same_padding else 1))
      c, side = width, (side + 1) // 2
    self.convs = nn.ModuleList(convs)
    self.dense = nn.Linear(c * side * side, dense)
    self.projection = nn.Linear(dense, num_bits)

  def forward(self, x):  # x float32 [n, C, H, W]
    for conv in self.convs:
      if self.same_padding:
        x = F.pad(x, (0, 1, 0, 1))
      x = F.relu(conv(x))
    return self.projection(F.relu(self.dense(x.flatten(1))))


def _unit_rows(x):
  return x / torch.sqrt(torch.sum(x * x, dim=1, keepdim=True) + 1e-12)


def torch_cosine_hamming(u, v):
  """``(K/2) (1 - cos(u_i, v_j))``, as jhash.losses.cosine_hamming_distance."""
  return 0.5 * u.shape[1] * torch.clamp(1.0 - _unit_rows(u) @ _unit_rows(v).T, min=0.0)


def torch_dch_loss(u, v, similarity, weights, gamma=20.0, quantization=0.1, epsilon=1e-6):
  """jhash.losses.dch_loss, line by line."""
  h = torch.tanh(u)
  d = torch_cosine_hamming(h, torch.tanh(v))
  nll = similarity * torch.log1p(d / gamma) + (1.0 - similarity) * torch.log1p(
    gamma / (d + epsilon)
  )
  pair_term = torch.sum(weights * nll) / torch.clamp(torch.sum(weights), min=1e-12)
  to_vertex = torch_cosine_hamming(torch.abs(h), torch.ones((1, h.shape[1])))[:, 0]
  return pair_term + quantization * torch.mean(torch.log1p(to_vertex / gamma))


def torch_pairs(labels):
  """In-batch similarities and balanced pair weights (jhash.losses.balanced_pair_weights)."""
  s = (labels[:, None] == labels[None, :]).float()
  mask = 1.0 - torch.eye(labels.shape[0])
  total, similar = mask.sum(), (mask * s).sum()
  dissimilar = total - similar
  both = bool(similar > 0) and bool(dissimilar > 0)
  w_sim = total / (2.0 * torch.clamp(similar, min=1.0)) if both else torch.tensor(1.0)
  w_dis = total / (2.0 * torch.clamp(dissimilar, min=1.0)) if both else torch.tensor(1.0)
  return s, mask * (s * w_sim + (1.0 - s) * w_dis)


def torch_step(net, opt, x, labels):
  """One DCH step in eager PyTorch: x float32 [b, 1, 28, 28] (standardised)."""
  similarity, weights = torch_pairs(labels)
  u = net(x)
  loss = torch_dch_loss(u, u, similarity, weights)
  opt.zero_grad(set_to_none=True)
  loss.backward()
  opt.step()
  return loss.detach()


def torch_codes(net, x, chunk=1024):
  """int8 [n, K] in {-1, +1}: sign of the logits, +1 at 0 (jhash.codes.sign)."""
  out = []
  with torch.no_grad():
    for i in range(0, x.shape[0], chunk):
      logits = net(x[i : i + chunk])
      out.append(torch.where(logits >= 0, 1, -1).to(torch.int8).numpy())
  return np.concatenate(out)


def to_torch_images(images, mean, scale):
  """Pixels [n, 28, 28] -> standardised float32 tensor [n, 1, 28, 28] (jhash's scaling)."""
  return torch.from_numpy(
    np.ascontiguousarray(((images.astype(np.float32) - mean) * scale)[:, None])
  )


def numpy_statistics(images):
  """jhash.training.input_statistics for images: one mean and 1 / std over all pixels."""
  mean, scale = training.input_statistics(jnp.asarray(images))
  return np.float32(mean), np.float32(scale)


# ----------------------------------------------------------------------------- checks


def check_loss(rng):
  """The PyTorch loss and its gradient against jhash.losses.dch_loss on the same u."""
  u = rng.normal(size=(128, NUM_BITS)).astype(np.float32)
  labels = rng.integers(0, 10, 128).astype(np.int32)
  s = jlosses.label_similarity(jnp.asarray(labels), jnp.asarray(labels))
  w = jlosses.balanced_pair_weights(s, jlosses.off_diagonal(128))
  value, grad = jax.value_and_grad(lambda a: jlosses.dch_loss(a, a, s, w))(jnp.asarray(u))
  tu = torch.tensor(u, requires_grad=True)
  ts, tw = torch_pairs(torch.from_numpy(labels).long())
  tvalue = torch_dch_loss(tu, tu, ts, tw)
  tvalue.backward()
  ok_pairs = np.allclose(ts.numpy(), s) and np.allclose(tw.numpy(), w, rtol=1e-6)
  ok_value = abs(tvalue.item() - float(value)) <= 1e-5 * abs(float(value))
  ok_grad = np.allclose(tu.grad.numpy(), grad, rtol=1e-4, atol=1e-7)
  return bool(ok_pairs and ok_value and ok_grad)


def load_jhash_params(net: TorchSmallCNN, params) -> None:
  """Copy SmallCNN parameters (im2col kernels [9 C, O], NHWC flattening) into ``net``."""
  with torch.no_grad():
    c = net.convs[0].in_channels
    for i, conv in enumerate(net.convs):
      kernel = np.asarray(params[f"conv_{i}"]["kernel"]).reshape(3, 3, c, -1)
      conv.weight.copy_(torch.from_numpy(kernel.transpose(3, 2, 0, 1).copy()))
      conv.bias.copy_(torch.from_numpy(np.array(params[f"conv_{i}"]["bias"])))
      c = kernel.shape[-1]
    dense = np.asarray(params["dense"]["kernel"])  # rows (h, w, c)
    side = int(round((dense.shape[0] // c) ** 0.5))
    dense = dense.reshape(side, side, c, -1).transpose(2, 0, 1, 3).reshape(dense.shape[0], -1)
    net.dense.weight.copy_(torch.from_numpy(dense.T.copy()))  # torch flattens (c, h, w)
    net.dense.bias.copy_(torch.from_numpy(np.array(params["dense"]["bias"])))
    head = np.asarray(params["projection"]["kernel"])
    net.projection.weight.copy_(torch.from_numpy(head.T.copy()))
    net.projection.bias.copy_(torch.from_numpy(np.array(params["projection"]["bias"])))


def check_network(state, x_std):
  """PyTorch with jhash's parameters and padding gives jhash's logits; same sizes."""
  net = TorchSmallCNN(NUM_BITS, same_padding=True)
  load_jhash_params(net, state.coder.train.params)
  model = jhash.models.backbone((28, 28), NUM_BITS)
  want = training.predict(model, state.coder.train, jnp.asarray(x_std[:, 0, :, :, None])).logits
  with torch.no_grad():
    got = net(torch.from_numpy(x_std)).numpy()
  sizes = sum(p.numel() for p in TorchSmallCNN(NUM_BITS).parameters()) == sum(
    x.size for x in jax.tree.leaves(state.coder.train.params)
  )
  return bool(sizes and np.allclose(got, want, rtol=1e-4, atol=1e-5))


# ----------------------------------------------------------------------------- part 1


class PatchesOnlySmallCNN(jhash.models.SmallCNN):
  """SmallCNN (no BatchNorm) with every convolution the product of its patches and kernel.

  How SmallCNN computed its convolutions before ``StridedConv`` (``nn.Dense`` over
  ``strided_patches``): the same parameters and function, for a same-run comparison.
  """

  @fnn.compact
  def __call__(self, x, *, train=False):
    del train
    for i, width in enumerate(self.channels):
      x = fnn.relu(fnn.Dense(width, name=f"conv_{i}")(jhash.models.strided_patches(x)))
    x = fnn.relu(fnn.Dense(self.dense, name="dense")(x.reshape(x.shape[0], -1)))
    return jhash.models.HashOutputs(fnn.Dense(self.num_bits, name="projection")(x), x)


def compiled_operations(method, state, minibatch, key) -> collections.Counter:
  """The compiled train step's operations: (kind, result shape) -> count."""
  text = jax.jit(method.update, donate_argnums=0).lower(state, minibatch, key).compile()
  text = text.as_text()
  entry = text[text.index("ENTRY") :]
  found = (re.match(r"\s*(?:ROOT )?%\S+ = (\S+) ([\w-]+)\(", line) for line in entry.splitlines())
  return collections.Counter((m.group(2), m.group(1)) for m in found if m)


def throughput(train, repeats, fit_steps, encode_items, batch=128, steps=20):
  """Images per second of each row, per repeat (interleaved): {group: {row: [rates]}}."""
  key = jax.random.key(0)
  method = jhash.methods.dch(NUM_BITS, batch_size=batch)
  patches_only = jhash.methods.dch(
    NUM_BITS, batch_size=batch, backbone=jhash.models.model(PatchesOnlySmallCNN(NUM_BITS), (28, 28))
  )
  images, labels = train["views"][0], train["labels"]
  minibatch = jax.device_put({"views": (images[:batch],), "labels": labels[:batch]})
  to_encode = jax.device_put({"views": (images[:encode_items],)})
  step_key = jax.random.key(1)

  def jhash_step(m):
    holder = [jhash.init(m, key, minibatch)]
    update = jax.jit(m.update, donate_argnums=0)

    def run():
      for _ in range(steps):
        holder[0], _ = update(holder[0], minibatch, step_key)
      return holder[0]

    return run, holder

  def jhash_fit():
    state, _ = jhash.fit(
      method, key, train, num_steps=fit_steps, log_every=fit_steps, progress=False
    )
    return state

  mean, scale = numpy_statistics(images)
  tx = to_torch_images(images[:batch], mean, scale)
  ty = torch.from_numpy(labels[:batch]).long()
  torch.manual_seed(0)
  torch_encoder = TorchSmallCNN(NUM_BITS).eval()

  def torch_row(threads):
    torch.manual_seed(0)
    net = TorchSmallCNN(NUM_BITS)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def run():
      torch.set_num_threads(threads)
      for _ in range(steps):
        torch_step(net, opt, tx, ty)

    return run

  def torch_encode(threads):
    def run():
      torch.set_num_threads(threads)
      return torch_codes(torch_encoder, to_torch_images(images[:encode_items], mean, scale))

    return run

  new_step, new_state = jhash_step(method)
  old_step, old_state = jhash_step(patches_only)
  same_operations = compiled_operations(method, new_state[0], minibatch, step_key) == (
    compiled_operations(patches_only, old_state[0], minibatch, step_key)
  )
  rows = {  # name: (function, images per call, group)
    f"PyTorch eager, {CORES} threads": (torch_row(CORES), steps * batch, "train"),
    "PyTorch eager, 1 thread": (torch_row(1), steps * batch, "train"),
    "jhash, one jitted step per call": (new_step, steps * batch, "train"),
    f"jhash.fit, {fit_steps} steps in one compiled loop": (jhash_fit, fit_steps * batch, "train"),
    "jhash, one jitted step, all convolutions as patches' products": (
      old_step,
      steps * batch,
      "train",
    ),
    f"PyTorch eval, {CORES} threads": (torch_encode(CORES), encode_items, "encode"),
    "PyTorch eval, 1 thread": (torch_encode(1), encode_items, "encode"),
    "jhash.encode": (lambda: jhash.encode(method, new_state[0], to_encode), encode_items, "encode"),
    "jhash.encode, all convolutions as patches' products": (
      lambda: jhash.encode(patches_only, old_state[0], to_encode),
      encode_items,
      "encode",
    ),
  }
  runs = {name: fn for name, (fn, _, _) in rows.items()}
  t0 = time.perf_counter()
  _report.interleaved(runs, 1)  # warm-up: compiles, spins up threads
  print(f"part 1 warm-up (compiles) {time.perf_counter() - t0:.1f} s", flush=True)
  rates = {"train": {}, "encode": {}}
  for name, (_, _, group) in rows.items():
    rates[group][name] = []
  for r in range(repeats):  # the order reversed every other repeat: no row always follows torch
    times = _report.interleaved(runs if r % 2 == 0 else dict(reversed(runs.items())), 1)
    for name, (_, n, group) in rows.items():
      rates[group][name].append(n / times[name])
    print(
      f"repeat {r}: " + ", ".join(f"{k}: {n / times[k]:,.0f}" for k, (_, n, _) in rows.items()),
      flush=True,
    )
  return rates, same_operations


def _speed_ups(rates, names, torch_names):
  best_torch = [max(a, b) for a, b in zip(*(rates[n] for n in torch_names))]
  ratio_rows = []
  for n in names:
    cells = [n]
    for ref in torch_names + ["best"]:
      ref_rates = best_torch if ref == "best" else rates[ref]
      cells.append(f"x{statistics.median(a / b for a, b in zip(rates[n], ref_rates)):.2f}")
    ratio_rows.append(cells)
  header = ["jhash row"] + [f"/ {n.replace('PyTorch ', '')}" for n in torch_names]
  return _report.table(header + ["/ best PyTorch"], ratio_rows)


def throughput_body(rates, repeats, load, encode_items, batch=128):
  train, encode = rates["train"], rates["encode"]
  names = list(train)
  old, new = names[4], names[2]
  enc_names = list(encode)
  rows = [
    [
      n,
      f"{statistics.median(train[n]):,.0f}",
      f"{statistics.median(train[n]) / batch:.1f}",
      f"{1e3 * batch / statistics.median(train[n]):.1f}",
    ]
    for n in names
  ]
  enc_rows = [[n, f"{statistics.median(encode[n]):,.0f}"] for n in enc_names]
  step_gain = statistics.median(a / b for a, b in zip(train[new], train[old]))
  enc_gain = statistics.median(a / b for a, b in zip(encode[enc_names[2]], encode[enc_names[3]]))
  return "\n".join(
    [
      f"### Train-step throughput, batch {batch}\n",
      f"Median of {repeats} interleaved repeats (the order reversed every other one) after "
      f"a warm-up; load average (1 min) "
      f"{load:.1f} on {CORES} cores at the start (a shared machine: compare the ratios, "
      "measured in the same repeats, not the rates).",
      "",
      _report.table(["row", "images/s", "steps/s", "ms per step"], rows),
      "",
      "Speed-up (median over repeats of jhash's images/s over PyTorch's in the same repeat):",
      "",
      _speed_ups(train, names[2:4], names[:2]),
      "",
      f"### Encoding throughput ({encode_items:,} training images)\n",
      "Evaluation-mode forward pass and signs, the pixels standardised inside the timing; "
      "the same repeats as above.",
      "",
      _report.table(["row", "images/s"], enc_rows),
      "",
      _speed_ups(encode, enc_names[2:3], enc_names[:2]),
      "",
      f"`StridedConv` (evaluated: the one-channel first layer as nine multiply-adds, the "
      f"second as the patches' product; differentiated: the patches' product) against every convolution as the product of its patches and kernel, "
      f"medians of the ratios in the same repeats: encoding x{enc_gain:.2f}; train step "
      f"x{step_gain:.2f}, where the two compiled train steps hold the same operations (a "
      f"check below), so any difference there is the machine's noise.",
    ]
  )


# ----------------------------------------------------------------------------- part 2


def torch_train(images, labels, batch, epochs, lr, seed, threads):
  torch.set_num_threads(threads)
  torch.manual_seed(seed)
  rng = np.random.default_rng(seed)
  mean, scale = numpy_statistics(images)
  x, y = to_torch_images(images, mean, scale), torch.from_numpy(labels).long()
  net = TorchSmallCNN(NUM_BITS)
  opt = torch.optim.Adam(net.parameters(), lr=lr)
  n = x.shape[0]
  per_epoch = n // batch
  losses = []
  for _ in range(epochs):
    order = torch.from_numpy(rng.permutation(n))
    for s in range(per_epoch):
      idx = order[s * batch : (s + 1) * batch]
      losses.append(torch_step(net, opt, x[idx], y[idx]))
  return net, (mean, scale), float(torch.stack(losses[-per_epoch:]).mean())


def end_to_end(train, query, database, epochs, threads):
  method = (
    jhash.methods.dch(NUM_BITS)
    if epochs is None
    else jhash.methods.dch(NUM_BITS, num_epochs=epochs)
  )
  batch, epochs = method.batch_size, method.num_epochs
  n = train["labels"].shape[0]
  per_epoch = n // batch
  out = {"batch": batch, "epochs": epochs, "steps": per_epoch * epochs, "rounds": []}
  key = jax.random.key(0)
  first_codes = None
  for r in range(2):
    t0 = time.perf_counter()
    state, history = jhash.fit(method, key, train, progress=False)
    jax.block_until_ready(state)
    j_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    db_codes = np.asarray(jhash.encode(method, state, database))
    j_encode = time.perf_counter() - t0
    q_codes = np.asarray(jhash.encode(method, state, query))

    t0 = time.perf_counter()
    net, (mean, scale), t_loss = torch_train(
      train["views"][0], train["labels"], batch, epochs, 1e-3, 0, threads
    )
    t_train = time.perf_counter() - t0
    net.eval()
    t0 = time.perf_counter()
    t_db = torch_codes(net, to_torch_images(database["views"][0], mean, scale))
    t_encode = time.perf_counter() - t0
    t_q = torch_codes(net, to_torch_images(query["views"][0], mean, scale))
    rnd = {
      "jhash_train": j_train,
      "jhash_encode": j_encode,
      "torch_train": t_train,
      "torch_encode": t_encode,
      "jhash_loss": float(np.mean(history["loss"][-per_epoch:])),
      "torch_loss": t_loss,
    }
    if r == 0:
      rnd["jhash_map"] = jhash.metrics.mean_average_precision(
        q_codes, db_codes, query["labels"], database["labels"]
      )
      rnd["torch_map"] = jhash.metrics.mean_average_precision(
        t_q, t_db, query["labels"], database["labels"]
      )
      first_codes = (db_codes, t_db)
    else:
      out["same_codes"] = (
        bool(np.array_equal(first_codes[0], db_codes)),
        bool(np.array_equal(first_codes[1], t_db)),
      )
    out["rounds"].append(rnd)
    print(
      f"end to end, round {r}: " + ", ".join(f"{k} {v:.4g}" for k, v in rnd.items()), flush=True
    )
  return out


def end_to_end_body(e2e, sizes, threads):
  r0, r1 = e2e["rounds"]
  rows = [
    [
      "jhash `dch(32)` + `jhash.fit`",
      f"{r0['jhash_train']:.1f} s",
      f"{r1['jhash_train']:.1f} s",
      f"{r0['jhash_encode']:.2f} s",
      f"{r1['jhash_encode']:.2f} s",
      f"{r0['jhash_loss']:.4f}",
      f"**{r0['jhash_map']:.4f}**",
    ],
    [
      f"PyTorch eager ({threads} thread{'s' if threads > 1 else ''})",
      f"{r0['torch_train']:.1f} s",
      f"{r1['torch_train']:.1f} s",
      f"{r0['torch_encode']:.2f} s",
      f"{r1['torch_encode']:.2f} s",
      f"{r0['torch_loss']:.4f}",
      f"**{r0['torch_map']:.4f}**",
    ],
  ]
  header = [
    "model",
    "train, round 1",
    "train, round 2",
    "encode db, round 1",
    "encode db, round 2",
    "loss, last epoch",
    "mAP (whole db)",
  ]
  q, n_train, n_db = sizes
  return "\n".join(
    [
      "### DCH end to end, Fashion-MNIST, 32 bits\n",
      f"{n_train:,} training images, {q:,} queries, a database of {n_db:,} (the training "
      f"images among them); batch {e2e['batch']}, {e2e['epochs']} epoch"
      f"{'s' if e2e['epochs'] != 1 else ''} "
      f"({e2e['steps']:,} steps), Adam 1e-3. Round 1 of jhash includes XLA's compilation "
      "of the training loop and of the encoder; round 2 calls the same method again "
      "(compiled). Encoding: the database's codes (chunks of 1,024). mAP tie-aware over "
      "the whole database (`jhash.metrics.mean_average_precision`) of round 1's models.",
      "",
      _report.table(header, rows),
      "",
      f"Ratios: training wall time PyTorch / jhash x{r0['torch_train'] / r0['jhash_train']:.2f} "
      f"(round 1, with compilation), x{r1['torch_train'] / r1['jhash_train']:.2f} (round 2); "
      f"encoding x{r0['torch_encode'] / r0['jhash_encode']:.2f} / "
      f"x{r1['torch_encode'] / r1['jhash_encode']:.2f}; mAP difference jhash - PyTorch "
      f"{r0['jhash_map'] - r0['torch_map']:+.4f}. jhash's compilation (round 1 - round 2 "
      f"of its training): about {r0['jhash_train'] - r1['jhash_train']:.1f} s.",
    ]
  )


# ----------------------------------------------------------------------------- part 3


def nbytes(tree) -> int:
  return sum(x.nbytes for x in jax.tree.leaves(tree))


def memory_body(train):
  key = jax.random.key(0)
  plain = jhash.init(jhash.methods.dch(NUM_BITS), key, train)
  banked = jhash.init(jhash.methods.dch(NUM_BITS, memory=True), key, train)
  n = train["labels"].shape[0]
  label_bytes = train["labels"].dtype.itemsize * int(np.prod(train["labels"].shape[1:], dtype=int))
  formula = n * NUM_BITS * 4 + n * label_bytes + n
  mem = banked.memory
  b = 64
  return "\n".join(
    [
      "### Memory of the memory-bank variant\n",
      "`jhash.methods.dch(32, memory=True)` keeps every training item's latest outputs: "
      "`Memory(outputs float32 [n, K], labels [n] or [n, C], filled bool [n])`, "
      "**n (4 K + L + 1) bytes**, L the bytes of one item's labels (4 for int32 class ids, "
      "C for multi-hot bool). Each step also forms the similarities, pair weights and "
      "relaxed distances of its b minibatch items against b + n others: about "
      f"3 x 4 b (b + n) bytes of temporaries (b = {b}, n = {n:,}: "
      f"{3 * 4 * b * (b + n) / 2**20:.1f} MiB).",
      "",
      _report.table(
        ["state", "bytes (measured, sum of leaves' nbytes)"],
        [
          ["`dch(32)` (network, Adam moments, standardisation)", f"{nbytes(plain):,}"],
          ["`dch(32, memory=True)`", f"{nbytes(banked):,}"],
          [
            f"of which the memory bank (outputs {mem.outputs.shape} {mem.outputs.dtype}, labels "
            f"{mem.labels.shape} {mem.labels.dtype}, filled {mem.filled.shape})",
            f"{nbytes(mem):,} (formula: {formula:,})",
          ],
        ],
      ),
    ]
  )


# ----------------------------------------------------------------------------- main


NOTES = """\
Notes. The ratios depend on the machine's other work. XLA uses both cores when they are
free; with them busy (load average 5-10 on these 2 cores), other runs of this script and
of its pieces measured jhash's step at 1.2-1.4 times the best PyTorch row, fit's loop at
1.1-1.3 times, the end-to-end training at about 1x PyTorch's with jhash's compilation
and 2x without, and jhash's first `fit` compiling for 8-11 s (the train step alone,
about 4.5 s: network, loss and Adam). Under that load, a profile of jhash's step
(medians per operation, batch 128) put 9-12 ms in XLA's operations: the matrix products
(the convolutions as dense layers over im2col patches, the dense layer and the head,
forward and backward) about 60 %, building the patches and their gradient (strided
slices, concatenations, padded sums, transposes) about 30 %, the DCH loss's [b, b] part
and the Adam update under a millisecond each; the rest of the wall time was dispatch
between XLA's ~115 operations and waiting for a core. Alternatives for training, timed
in one process with paired repeats: `lax.conv_general_dilated` (NHWC / HWIO) with XLA's
gradients (about 6 times slower inside a compiled loop), the one-channel first layer as
nine fused multiply-adds, a space-to-depth 2 x 2 convolution, a sum of nine per-tap
products, patches grouped by 2 x 2 block (four longer copies instead of nine): none was
more than 3 % faster, so training still runs the patches' products. What helped is
evaluation: `jhash.models.SmallCNN`'s layers (`StridedConv`), when not differentiated,
run the one-channel first layer as nine fused multiply-adds of strided slices (earlier:
XLA's forward convolution for every layer, x1.3-2.3 over the patches on an AMD EPYC at
chunks of 1,024); the rows against the patches-only network measure that in the same
repeats. jhash encodes in chunks of 256 (the coder's default), PyTorch in chunks of 1,024. PyTorch at 2 threads suffers more
from other work than at 1 thread (both threads must run at once).
"""


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small smoke run; print only")
  parser.add_argument("--repeats", type=int, default=None)
  args = parser.parse_args()
  quick = args.quick
  repeats = args.repeats or (2 if quick else 7)
  options = dict(query_per_class=20, train_per_class=100, database_limit=5000) if quick else {}
  train, query, database = jhash.data.load_protocol("fashion-mnist", seed=0, images=True, **options)
  load = os.getloadavg()[0]
  rng = np.random.default_rng(0)
  mean, scale = numpy_statistics(train["views"][0])
  probe = jhash.init(jhash.methods.dch(NUM_BITS), jax.random.key(0), train)
  checks = {
    "PyTorch DCH loss == jhash.losses.dch_loss (value, gradient)": check_loss(rng),
    "PyTorch network with jhash's parameters == jhash's logits": check_network(
      probe, to_torch_images(train["views"][0][:64], mean, scale).numpy()
    ),
  }
  print(checks, flush=True)

  encode_items = train["labels"].shape[0]
  rates, same_operations = throughput(train, repeats, 20 if quick else 200, encode_items)
  checks[
    "the train steps with SmallCNN and with the patches-only network compile to the same operations"
  ] = same_operations
  torch_names = list(rates["train"])[:2]
  faster = max(torch_names, key=lambda n: statistics.median(rates["train"][n]))
  threads = CORES if faster == torch_names[0] else 1
  e2e = end_to_end(train, query, database, 1 if quick else None, threads)
  checks["both rounds of part 2 give the same database codes (jhash, PyTorch)"] = all(
    e2e["same_codes"]
  )
  sizes = (query["labels"].shape[0], train["labels"].shape[0], database["labels"].shape[0])
  check_line = "; ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in checks.items())
  body = "\n".join(
    [
      f"PyTorch {torch.__version__} on the CPU (`OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}`"
      f"), flax, optax; Fashion-MNIST at 32 bits, seed 0.",
      "",
      throughput_body(rates, repeats, load, encode_items),
      "",
      end_to_end_body(e2e, sizes, threads),
      "",
      memory_body(train),
      "",
      f"Checks in the same run: {check_line}.",
      "",
      NOTES,
    ]
  )
  if quick:
    print(body)
  else:
    _report.write_section(TITLE, "python benchmarks/bench_train.py", body)
  if not all(checks.values()):
    sys.exit(1)


if __name__ == "__main__":
  main()

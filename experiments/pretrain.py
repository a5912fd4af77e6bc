"""The pretraining trainer: a classifier on a labelled protocol, saved as a backbone.

The analogue of the ImageNet classifiers the deep hashing papers start from: a
``jhash.methods.classifier`` trained on one protocol (``scene-singles``: single
Fashion-MNIST items at random scale and position, from a pool disjoint from the items of
the ``scenes`` protocol), its held-out accuracy measured, and its weights written to
``WORKDIR/backbone.npz`` (``jhash.coder.save_weights``), the file every deep method's
``init_variables`` reads (``experiments/configs/mch.py:scenes``).

Config keys (``experiments/configs/pretrain.py``):

* ``trainer``: ``"experiments.pretrain"``; ``seed``.
* ``dataset``: ``{"protocol": a jhash.data.PROTOCOLS name with class ids, **its options}``.
* ``classifier``: ``jhash.methods.classifier`` options (``num_classes`` included).
* ``checkpoint_every``: steps between checkpoints (resumable, as every trainer).

Writes ``results.json`` (``accuracy`` on the protocol's queries, ``train_accuracy``, the
training history, ``backbone``: the weights file) and ``backbone.npz``.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np

import jhash
from experiments import harness

KEYS = ("trainer", "seed", "dataset", "classifier", "checkpoint_every")
WEIGHTS = "backbone.npz"


def validate(config) -> None:
  """Raise ``ConfigError`` for anything the config names that does not exist."""
  harness.check_keys(config, KEYS)
  if "protocol" not in config.dataset:
    raise harness.ConfigError("config.dataset: missing key 'protocol'.")
  options = {k: v for k, v in config.dataset.items() if k != "protocol"}
  try:
    jhash.data.check_protocol(config.dataset.protocol, options)
  except ValueError as error:
    raise harness.ConfigError(f"config.dataset: {error}") from None
  harness.check_kwargs(jhash.methods.classifier, config.classifier, "config.classifier", skip=0)
  try:
    jhash.methods.classifier(**config.classifier.to_dict())
  except (TypeError, ValueError) as error:
    raise harness.ConfigError(f"config.classifier: {error}") from None
  if isinstance(config.seed, bool) or not isinstance(config.seed, int) or config.seed < 0:
    raise harness.ConfigError(f"config.seed: must be an int >= 0; got {config.seed!r}.")
  harness.check_counts(config, ("checkpoint_every",))  # >= 1, as every trainer's


def load(config) -> tuple[dict, dict]:
  """The protocol's training and held-out batches, checked before any training: a setting
  the protocol refuses, an empty part, or class ids outside ``num_classes`` is a
  ``ConfigError`` naming the key."""
  spec = config.dataset.to_dict()
  protocol = spec.pop("protocol")
  train, query, _ = harness.load_split(
    lambda: jhash.data.load_protocol(protocol, config.seed, **spec),
    "config.dataset",
    ("training items", "held-out items (num_queries)"),
  )
  labels = np.concatenate([np.asarray(train["labels"]), np.asarray(query["labels"])])
  if labels.ndim != 1:
    raise harness.ConfigError(
      f"config.dataset: {config.dataset.protocol} has multi-label items; pretraining reads "
      "class ids (scene-singles, fashion-mnist, mnist-5k)."
    )
  classes = config.classifier.num_classes
  if labels.max() >= classes:
    raise harness.ConfigError(
      f"config.classifier.num_classes: {classes}, but {config.dataset.protocol} has class "
      f"ids up to {int(labels.max())}."
    )
  return train, query


def accuracy(method, state, batch) -> float:
  """The fraction of ``batch``'s items whose largest logit is their class."""
  predicted = np.asarray(method.extras.predict(state, batch))
  return float(np.mean(predicted == np.asarray(batch["labels"])))


def train_and_evaluate(config, workdir) -> dict:
  """Train the classifier (resumably), measure it, write ``backbone.npz`` and results."""
  validate(config)
  started = time.time()
  root = pathlib.Path(workdir)
  train, query = load(config)
  method = jhash.methods.classifier(**config.classifier.to_dict())
  cell = f"{config.dataset.protocol}/classifier/seed{config.seed}"

  def run():
    key = harness.cell_key(config.seed, config.dataset.protocol, "classifier")
    state, history = wd.fit(cell, method, key, train, checkpoint_every=config.checkpoint_every)
    jhash.coder.save_weights(root / WEIGHTS, state)  # before the cell is marked done
    return {
      "accuracy": accuracy(method, state, query),
      "train_accuracy": accuracy(method, state, train),
      "history": {k: v.tolist() for k, v in history.items()},
    }

  with harness.Workdir(root, config) as wd:
    result = harness.run_cells([(cell, run)], wd)[cell]
    if not (root / WEIGHTS).is_file():
      raise harness.WorkdirError(
        f"{root / WEIGHTS} is missing although the pretraining cell is done: delete "
        f"{root / 'progress.json'} and run again to retrain it (same seed, same weights)."
      )
    table = harness.format_table(
      [[config.dataset.protocol, result["accuracy"], result["train_accuracy"]]],
      ["data", "held-out accuracy", "training accuracy"],
    )
    print(f"\nPretrained classifier (seed {config.seed}):\n{table}", flush=True)
    metrics = {k: v for k, v in result.items() if k != "history"}
    harness.write_results(
      wd,
      config,
      metrics,
      started,
      extra={"table": table, "backbone": WEIGHTS, "seeds": [config.seed]},
    )
  return metrics

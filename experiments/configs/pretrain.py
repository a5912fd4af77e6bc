"""Pretraining the backbone of the MCH scenes experiment: a classifier of single items.

Command:  python -m experiments.main --config experiments/configs/pretrain.py --workdir runs/pretrain
Quick:    ... --config experiments/configs/pretrain.py:quick   (2,000 items, 1 epoch; the tests run it)
Writes:   runs/pretrain/backbone.npz, which experiments/configs/mch.py:scenes reads.
Protocol: ``scene-singles``: 22,000 56 x 56 scenes of one Fashion-MNIST item each, at a side
          uniform in 20..56 pixels and a uniform position, from the first 30,000 training
          images (the scenes' items come from the other 40,000 pooled images); 20,000 train
          the classifier (the small CNN, the network the deep methods use on 56 x 56
          images) for 10 epochs, 2,000 held out measure it. The analogue of an ImageNet
          classifier: it knows the items at every scale and place, never the scenes.
"""

import ml_collections


def get_config(arg=None):
  arg = arg or "singles"
  if arg not in ("singles", "quick"):
    raise ValueError(f"unknown config argument {arg!r}; use 'singles' or 'quick'.")
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.pretrain"
  config.seed = 0
  config.dataset = {"protocol": "scene-singles", "num_items": 22_000, "num_queries": 2_000}
  config.classifier = {
    "num_classes": 10,
    "batch_size": 64,
    "num_epochs": 10,
    "learning_rate": 1e-3,
  }
  config.checkpoint_every = 1000
  if arg == "quick":
    config.dataset.num_items = 2_000
    config.dataset.num_queries = 500
    config.classifier.num_epochs = 1
  return config.lock()

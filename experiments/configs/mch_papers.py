"""MCH on the data sets of its paper, from the user's copy: MCH over each of the five base
models, on NUS-WIDE, MS-COCO and MIRFlickr-25K.

Command:  python -m experiments.main --config experiments/configs/mch_papers.py:NAME \
              --config.datasets.NAME.root=/path/to/your/copy --workdir runs/mch_NAME
          NAME: nuswide_21, coco, mirflickr_21, mirflickr (a folder holding the toolboxes' ``train.txt``,
          ``test.txt`` and ``database.txt``, as ``papers.py`` takes it).
          ``NAME,stream`` reads the images from their files as each cell trains and
          codes, never holding them (``experiments.streaming``; the bases read the images
          normalised per channel as they come, ``standardize=False``), and leaves out
          MCH-ADSH: ADSH cannot stream.
          ``--config.pretrained=FILE`` starts every network (MCH's bases')
          from a weights file, e.g. torchvision's VGG-16 ImageNet weights
          (``jhash.models.load_torchvision``); ``--config.arch=alexnet`` (or resnet18,
          resnet50) builds them as that network instead of VGG-16.
Quick:    ... mch_papers.py:quick --config.datasets.nuswide_21.root=DIR   (MCH-DCH at 16
          bits on NUS-WIDE-shaped lists of tiny images decoded at 28 x 28, the small CNN, a
          few base and agent epochs, the database re-encoded at sigma 0.5 and 1.0; the tests run it
          on lists they write)
Runtime:  quick: seconds. The others train VGG-16 at 224 x 224, five bases and their
          agents at three lengths: a GPU's work.
Expected: no result is reported from these configs (jhash ships none of these sets); the
          docs' guide to the papers' data sets says what the paper reports and what
          ``mch.py`` measured on the scenes.
Protocol: the presets of ``jhash.data.PAPER_PRESETS``; MCH's paper (Sec. 5.1) draws:
          * NUS-WIDE: the 21 most frequent concepts, 100 queries per concept, the database
            the rest, 500 training images per concept from it: ``nuswide_21`` as it is.
          * MS-COCO: 5,000 queries, the rest the database, 10,000 training images from it
            (following HashNet): ``coco`` as it is (HashNet's lists).
          * MIR FLICKR: 5,000 queries, the other 20,000 images the database, 10,000
            training images from it, 21 classes: ``mirflickr_21`` (lists of one's own in
            the toolboxes' layout with 21 label columns: no toolbox ships that split).
            ``mirflickr`` runs DeepHash-pytorch's split instead (1,000 queries, 4,000
            training, 20,000 database, 24 or 38 labels), for those lists.
          Similar: sharing a label. K of mAP@K: the preset's (5,000 on NUS-WIDE and MS-COCO,
          the whole database on MIRFlickr; the paper's text does not name its K).
          Methods: ``mch_NAME`` for the five base models of the paper (KSH, HashNet, ADSH,
          DCH, MMHH; the deep versions in ``jhash.methods``, each with its own network):
          MCH trains base NAME, then the agent (5 epochs), encoding the database with the
          whole image and five crops (sigma = 0.5, kept when the agent's keep probability
          passes xi = 0.5). Networks: VGG-16 (the paper's backbone, 4,096-d fc7 features)
          at 224 x 224, Adam at 1e-3, batch 64, 50 epochs (ADSH: 50 rounds of 100 steps over
          2,000 drawn items); 16, 32 and 64 bits.
          Reported: ``map_at_k`` (tie-aware mAP over each query's first K), ``map`` (whole
          database), P@1000, precision and recall within Hamming radius 0 and 2, and for
          each MCH cell the same with ``_multi`` (the database coded by MCH, an item's
          distance the least over its kept codes; queries keep one code) and
          ``codes_per_item_multi``; at 32 bits the F1-bucket curves (``f1_buckets.png``),
          precision-recall within Hamming radius 0..K (``pr_radius.png``) and P@N, R@N for
          N = 100 to 5,000 (``topn.png``). An MCH cell's single-code numbers are its base
          model's (the base alone, as ``papers.py`` trains it): no base trains twice.
          Trainer: ``experiments.retrieval``.
"""

import ml_collections
from ml_collections import config_dict

from experiments.configs import _papers_common as common

ARGS = ("nuswide_21", "coco", "mirflickr_21", "mirflickr", "quick")
DEEP = common.DEEP
MCH = tuple(f"mch_{name}" for name in DEEP)


def mch(base: str, agent_epochs: int = 5, **schedule) -> dict:
  """MCH over ``base`` trained with ``common.base_options(base, **schedule)``; the paper's
  encoding (sigma = 0.5, xi = 0.5)."""
  return {
    "method": "mch",
    "base": base,
    "base_options": common.base_options(base, **schedule),
    "agent_epochs": agent_epochs,
    "sigma": 0.5,
    "xi": 0.5,
  }


def get_config(arg=None):
  arg, stream = common.stream_arg(arg, ARGS)
  if arg not in ARGS:
    raise ValueError(
      f"unknown config argument {arg!r}; use one of {', '.join(ARGS)} (a data set with "
      f"{common.STREAM_SUFFIX} to stream it)."
    )
  name = "nuswide_21" if arg == "quick" else arg
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.retrieval"
  config.seed = 0
  config.num_seeds = 1
  config.bits = (16, 32, 64)
  config.pretrained = config_dict.placeholder(str)
  config.arch = config_dict.placeholder(str)
  config.datasets = {name: common.dataset(name)}
  config.methods = {f"mch_{b}": mch(b) for b in DEEP}
  config.evaluation = common.evaluation(radius=(0, 2), f1_buckets=True)
  config.tables = (
    "map_at_k",
    "map_at_k_multi",
    "map",
    "map_multi",
    "recall_radius_0",
    "recall_radius_0_multi",
    "precision_radius_0",
    "precision_radius_0_multi",
    "codes_per_item_multi",
  )
  config.plots = {
    "pr_curve_bits": 32,
    "f1_bucket_bits": 32,
    "curves": {"agent": {"metric": "reward", "methods": MCH}},
  }
  config.checkpoint_every = 400
  if stream:
    config.methods = {f"mch_{b}": mch(b) for b in common.STREAMABLE}
    config.plots.curves.agent.methods = tuple(f"mch_{b}" for b in common.STREAMABLE)
    common.stream(config, name)
  if arg == "quick":
    config.bits = (16,)
    config.datasets.nuswide_21.image_size = 28  # the small CNN's side
    config.methods = {"mch_dch": mch("dch", agent_epochs=2, epochs=6)}
    config.methods.mch_dch.base_options.batch_size = 32
    config.evaluation.precision_at = (5,)
    config.evaluation.topn = (1, 5, 10, 20)
    config.evaluation.sweep = {"sigma": (0.5, 1.0)}  # re-encoded: 1.0 gives the base's codes
    config.plots.pr_curve_bits = 16
    config.plots.f1_bucket_bits = 16
    config.plots.curves = {"agent": {"metric": "reward", "methods": ("mch_dch",)}}
  else:
    config.arch = "vgg16"  # the paper's backbone; quick keeps the small CNN
  common.link_networks(config)  # one override moves every network's start (and kind)
  return config.lock()

"""What the configs on the papers' data sets share: the data set's entry, the deep base
models' schedules, the evaluation and the one switch for every network's start and kind.

Used by ``papers.py`` (the five deep base models), ``hbmp_papers.py`` and
``mch_papers.py``; not a config itself (no ``get_config``). The configs import it as
``experiments.configs._papers_common``, so they run from the repository root, as every
config does (its trainer, ``experiments.retrieval``, is imported from there too).
"""

from ml_collections import config_dict

import jhash

#: The five deep base models of MCH's paper, each a ``jhash.methods.REGISTRY`` name.
DEEP = ("ksh", "hashnet", "adsh", "dch", "mmhh")
#: The deep base models that train from a stream of image files: all but ADSH, whose code
#: phase reads its drawn items all at once (``experiments.streaming``).
STREAMABLE = tuple(name for name in DEEP if name != "adsh")
#: The suffix of a config argument that streams a list set from its files.
STREAM_SUFFIX = ",stream"
#: The N of P@N and R@N, as DeepHash-pytorch draws them.
TOPN = (100, 200, 500, 1000, 2000, 5000)


def label(name: str) -> str:
  """The key of preset ``name`` in ``config.datasets``: its name as a Python name
  (``cifar10_1`` for ``cifar10-1``), since ml_collections parses an override's path
  (``--config.datasets.KEY.root=...``) as Python, where ``cifar10-1`` does not parse."""
  return name.replace("-", "_")


def dataset(name: str) -> dict:
  """The entry of preset ``name`` (``jhash.data.PAPER_PRESETS``): its protocol, a root the
  user must give, images decoded at 224 and the lists' text encoding for the list sets, an
  optional database limit; for the list sets also ``stream`` (False: the images decoded in
  memory; True: read from their files as the cells train and code, ``experiments.streaming``)
  and the streaming options, unset (their defaults)."""
  spec = {"protocol": name, "root": config_dict.placeholder(str)}
  if jhash.data.PAPER_PRESETS[name].layout == "lists":
    spec["image_size"] = 224
    spec["encoding"] = "utf-8"  # of the list files ("latin-1" for lists of older tools)
    spec["stream"] = False
    spec.update({k: config_dict.placeholder(int) for k in ("resize", "eval_batch_size")})
    spec["worker_count"] = config_dict.placeholder(int)
  spec["database_limit"] = config_dict.placeholder(int)
  return spec


def stream_arg(arg, names) -> tuple[str | None, bool]:
  """A config argument as (the preset's name, whether to stream it): ``NAME,stream``
  streams list set NAME from its files (``experiments.streaming``), leaving out the base
  models that cannot stream (``STREAMABLE``); a ValueError for a suffix on any other
  argument."""
  if not isinstance(arg, str) or not arg.endswith(STREAM_SUFFIX):
    return arg, False
  name = arg[: -len(STREAM_SUFFIX)]
  if name.endswith(STREAM_SUFFIX):
    raise ValueError(f"config argument {arg!r}: {STREAM_SUFFIX!r} is given twice; give it once.")
  lists = [
    n
    for n in names
    if jhash.data.PAPER_PRESETS.get(n) and jhash.data.PAPER_PRESETS[n].layout == "lists"
  ]
  if name not in lists:
    raise ValueError(
      f"config argument {arg!r}: {STREAM_SUFFIX!r} streams a list set's image files; use it "
      f"after one of {', '.join(lists)}."
    )
  return name, True


def shrink_cifar10(spec) -> None:
  """A CIFAR-10 entry cut down for a quick run: 2 queries and 5 training images per class
  from a cut-down copy of the binary release (``records_per_file=None``)."""
  spec.query_per_class = 2
  spec.train_per_class = 5
  spec.records_per_file = config_dict.placeholder(int)


def base_options(
  name: str,
  epochs: int = 50,
  adsh_rounds: int = 50,
  adsh_steps: int = 100,
  adsh_samples: int = 2000,
) -> dict:
  """The training schedule of the method ``name`` (everything but ``method``): Adam at
  1e-3 (the methods' default), batch 64, ``epochs`` epochs; ADSH ``adsh_rounds`` rounds of
  ``adsh_steps`` network steps over ``adsh_samples`` drawn items; ITQ 50 iterations. The
  defaults are the papers' configs' (50 epochs; ADSH 50 rounds of 100 steps over 2,000)."""
  if name == "adsh":
    return {
      "batch_size": 64,
      "rounds": adsh_rounds,
      "steps_per_round": adsh_steps,
      "num_samples": adsh_samples,
    }
  if name == "itq":
    return {"num_iters": 50}
  if name == "lsh":
    return {}
  return {"batch_size": 64, "num_epochs": epochs}


def methods(names, **schedule) -> dict:
  """``{name: {"method": name, **base_options(name, **schedule)}}`` for each of ``names``."""
  return {name: {"method": name, **base_options(name, **schedule)} for name in names}


def evaluation(**changes) -> dict:
  """The papers' evaluation: tie-aware mAP, mAP@K with the preset's K, P@1000, precision
  and recall within Hamming radius 2, the P@N / R@N curves (``TOPN``); ``changes`` replace
  or add keys (``experiments.retrieval``'s evaluation keys)."""
  return {
    "map_ties": ("aware",),
    "map_at": "protocol",
    "precision_at": (1000,),
    "radius": 2,
    "ndcg_at": config_dict.placeholder(int),
    "weighted": False,
    "topn": TOPN,
    **changes,
  }


def stream(config, label: str) -> None:
  """Stream data set ``label`` from its files and let every network read the pipeline's
  images as they come: normalised per channel by ImageNet's statistics, the input a
  pretrained backbone was trained on (``standardize=False``; MCH's bases' in
  ``base_options``). The methods must be ones that can stream (``STREAMABLE``)."""
  config.datasets[label].stream = True
  streamed = config.datasets[label].get_ref("stream")
  for spec in config.methods.values():  # standardize = not stream: an override moves both
    (spec.base_options if spec.method == "mch" else spec).standardize = streamed ^ True


def link_networks(config) -> None:
  """Point every network at ``config.pretrained`` (its start) and ``config.arch`` (its
  kind): the deep methods' ``init_variables`` and ``backbone``, MCH's in its
  ``base_options``, HBMP's hash functions' ``init_variables`` and ``model`` in its
  ``hash_options``, so one override moves them all."""
  for spec in config.methods.values():
    if spec.method in DEEP:
      target, kind = spec, "backbone"
    elif spec.method == "mch":
      target, kind = spec.base_options, "backbone"
    elif spec.method == "hbmp":
      target, kind = spec.hash_options, "model"
    else:
      continue
    target.init_variables = config.get_ref("pretrained")
    target[kind] = config.get_ref("arch")

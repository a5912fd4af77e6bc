"""jhash: learning to hash in JAX.

Binary codes (``jhash.codes``), Hamming search (``jhash.search``, ``jhash.index``),
exact retrieval metrics (``jhash.metrics``), hashing methods (``jhash.methods``)
and real datasets (``jhash.data``). ``import jhash`` loads no plotting or data
packages: ``jhash.data`` reads files only when a loader is called.
"""

from jhash import codes
from jhash import coder
from jhash import index
from jhash import losses
from jhash import methods
from jhash import metrics
from jhash import models
from jhash import search
from jhash import training
from jhash import files
from jhash import data
from jhash import distributed
from jhash._api import HashingMethod
from jhash._api import Phase
from jhash._api import Trained
from jhash._api import one_phase
from jhash._api import num_items
from jhash._encode import encode
from jhash._encode import encode_multi
from jhash._encode import encode_stream
from jhash._fit_pipeline import TrainingPipeline
from jhash._fit_pipeline import training_pipeline
from jhash._local_minibatches import LocalMinibatches
from jhash._local_minibatches import local_minibatches
from jhash._fit import epoch_permutation
from jhash._fit import fit
from jhash._fit import init
from jhash._fit import minibatches
from jhash._fit import schedule
from jhash._train import make_train
from jhash._network import Network
from jhash._network import network
from jhash._saving import restore
from jhash._saving import save
from jhash._grid import GammaSelection
from jhash._grid import GridSearch
from jhash._grid import PAPER_GAMMA_OVER_N
from jhash._grid import cdh_select_gamma
from jhash._grid import grid_search

__all__ = [
  "codes",
  "search",
  "index",
  "metrics",
  "methods",
  "losses",
  "models",
  "coder",
  "training",
  "data",
  "native",
  "files",
  "distributed",
  "HashingMethod",
  "Phase",
  "Trained",
  "one_phase",
  "num_items",
  "fit",
  "init",
  "schedule",
  "minibatches",
  "local_minibatches",
  "LocalMinibatches",
  "epoch_permutation",
  "make_train",
  "encode",
  "encode_multi",
  "encode_stream",
  "training_pipeline",
  "TrainingPipeline",
  "Network",
  "network",
  "save",
  "restore",
  "grid_search",
  "GridSearch",
  "cdh_select_gamma",
  "GammaSelection",
  "PAPER_GAMMA_OVER_N",
]

__version__ = "0.1.0"

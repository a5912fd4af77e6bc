"""Hashing methods, each a factory returning a ``HashingMethod`` (see ``_api``).

Every method's ``num_bits`` is an int in [1, ``MAX_NUM_BITS``] (65,536 bits).
"""

from jhash._api import HashingMethod
from jhash._api import MAX_NUM_BITS
from jhash._api import view_features
from jhash.methods._cdh import CDHState
from jhash.methods._cdh import cdh
from jhash.methods._classifier import ClassifierExtras
from jhash.methods._classifier import ClassifierState
from jhash.methods._classifier import classifier
from jhash.methods._crossview import CMFHState
from jhash.methods._crossview import CVHState
from jhash.methods._crossview import SCMState
from jhash.methods._crossview import cmfh
from jhash.methods._crossview import cvh
from jhash.methods._crossview import scm
from jhash.methods._deep import ADSHState
from jhash.methods._deep import adsh
from jhash.methods._deep import dch
from jhash.methods._deep import hashnet
from jhash.methods._deep import ksh
from jhash.methods._deep import mmhh
from jhash.methods._hbmp import HBMPState
from jhash.methods._hbmp import fit_to_targets
from jhash.methods._hbmp import hash_functions
from jhash.methods._hbmp import hbmp
from jhash.methods._itq import ITQState
from jhash.methods._itq import itq
from jhash.methods._lsh import LSHState
from jhash.methods._lsh import lsh
from jhash.methods._mch import MCHState
from jhash.methods._mch import mch
from jhash.methods._memory import Memory
from jhash.methods._pairwise import NetworkExtras
from jhash.methods._pairwise import PairwiseState
from jhash.methods._pairwise import pairwise
from jhash.methods import cdh_parts
from jhash.methods import hbmp_parts
from jhash.methods import mch_parts

__all__ = [
  "HashingMethod",
  "MAX_NUM_BITS",
  "view_features",
  "REGISTRY",
  "lsh",
  "LSHState",
  "itq",
  "ITQState",
  "cdh",
  "CDHState",
  "cvh",
  "CVHState",
  "scm",
  "SCMState",
  "cmfh",
  "CMFHState",
  "hbmp",
  "HBMPState",
  "hash_functions",
  "fit_to_targets",
  "pairwise",
  "PairwiseState",
  "classifier",
  "ClassifierState",
  "ClassifierExtras",
  "NetworkExtras",
  "Memory",
  "ksh",
  "hashnet",
  "adsh",
  "ADSHState",
  "dch",
  "mmhh",
  "mch",
  "MCHState",
  "mch_of",
  "cdh_parts",
  "hbmp_parts",
  "mch_parts",
]

#: name -> factory, for experiment configs and the conformance tests.
REGISTRY = {
  "lsh": lsh,
  "itq": itq,
  "cdh": cdh,
  "hbmp": hbmp,
  "cvh": cvh,
  "scm": scm,
  "cmfh": cmfh,
  "pairwise": pairwise,
  "ksh": ksh,
  "hashnet": hashnet,
  "adsh": adsh,
  "dch": dch,
  "mmhh": mmhh,
}


def mch_of(
  num_bits: int, *, base: str = "dch", base_options: dict | None = None, **options
) -> HashingMethod:
  """``mch`` over a base model named in ``REGISTRY`` (for configs): ``mch(REGISTRY[base](
  num_bits, **base_options), **options)``."""
  if base not in REGISTRY or base == "mch":
    raise ValueError(
      f"base must name a deep base model in jhash.methods.REGISTRY (ksh, "
      f"hashnet, adsh, dch, mmhh, pairwise); got {base!r}."
    )
  return mch(REGISTRY[base](num_bits, **dict(base_options or {})), **options)


REGISTRY["mch"] = mch_of

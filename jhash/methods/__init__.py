"""Hashing methods, each a factory returning a ``HashingMethod`` (see ``_api``)."""

from jhash.methods._api import HashingMethod
from jhash.methods._api import view_features
from jhash.methods.itq import ITQState
from jhash.methods.itq import itq
from jhash.methods.lsh import LSHState
from jhash.methods.lsh import lsh

# name -> factory, for experiment configs and the conformance tests.
REGISTRY = {
    "lsh": lsh,
    "itq": itq,
}

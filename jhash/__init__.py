"""jhash: learning to hash in JAX.

Binary codes (``jhash.codes``), Hamming search (``jhash.search``, ``jhash.index``),
exact retrieval metrics (``jhash.metrics``), hashing methods (``jhash.methods``) and
real datasets (``jhash.data``, imported on first use). ``import jhash`` loads no
plotting or data packages.
"""

from jhash import codes
from jhash import search

__version__ = "0.1.0"

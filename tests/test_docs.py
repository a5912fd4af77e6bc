"""The documentation: every public module says what it exports, the API reference lists
exactly that, and the site builds with every warning an error and every reference resolved.

The reference pages (``docs/api/*.md``) are written by ``python docs/apigen.py`` from each
module's ``__all__``; after changing an ``__all__``, run it again.
"""

import importlib
import importlib.util
import inspect
import pathlib
import posixpath
import re
import subprocess
import sys
import time
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BUILD_SECONDS = 180  # the build takes 25-65 s on 2 busy cores; 3 minutes is the limit


def _apigen():
  spec = importlib.util.spec_from_file_location("apigen", DOCS / "apigen.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


apigen = _apigen()
MODULES = apigen.public_modules()


def _own_doc(obj) -> str:
  """The object's own docstring: not a class's generated one (NamedTuple, dataclass)."""
  doc = (obj.__doc__ or "").strip()
  if inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("):
    return ""
  return doc


def test_the_public_modules_are_found():
  assert "jhash" in MODULES and "jhash.search" in MODULES and "jhash.methods.mch_parts" in MODULES
  assert not [m for m in MODULES if any(p.startswith("_") for p in m.split("."))]


@pytest.mark.parametrize("modname", MODULES)
def test_every_public_module_says_what_it_exports(modname):
  module = importlib.import_module(modname)
  assert (module.__doc__ or "").strip(), f"{modname} has no docstring"
  names = getattr(module, "__all__", None)
  assert names is not None, f"{modname} has no __all__"
  assert len(set(names)) == len(names), f"{modname}.__all__ repeats a name"
  missing = [n for n in names if not hasattr(module, n)]
  assert not missing, f"{modname}.__all__ names what it does not define: {missing}"
  undocumented = []
  for name in names:
    obj = getattr(module, name)
    if isinstance(obj, types.ModuleType):
      ok = obj.__name__ in MODULES and bool((obj.__doc__ or "").strip())
    elif inspect.isclass(obj) or callable(obj):
      ok = bool(_own_doc(obj))
    else:  # a constant: a doc comment (#:) or docstring where it is assigned
      ok = bool(apigen.attribute_doc(modname, name))
    if not ok:
      undocumented.append(name)
  assert not undocumented, f"{modname}: no docstring for {undocumented}"


def _documented(text: str) -> tuple[list[str], set[str]]:
  """The names of a reference page's summary table, and those it has an entry for."""
  lines = text.splitlines()
  start = lines.index(".. autosummary::") + 1
  summary = []
  for line in lines[start:]:
    if line.startswith("   :") or not line.strip():
      if summary and not line.strip():
        break
      continue
    if not line.startswith("   "):
      break
    summary.append(line.strip())
  entry = re.compile(r"^\.\. (?:auto(?:function|class|data|exception)|py:\w+):: +(\S+)")
  entries = {m.group(1) for line in lines if (m := entry.match(line))}
  return summary, entries


@pytest.mark.parametrize("modname", MODULES)
def test_the_reference_lists_exactly_each_modules_all(modname):
  module = importlib.import_module(modname)
  page = DOCS / "api" / apigen.page_name(modname)
  assert page.exists(), f"no reference page for {modname}: run python docs/apigen.py"
  summary, entries = _documented(page.read_text())
  names = list(module.__all__)
  modules = {n for n in names if isinstance(getattr(module, n), types.ModuleType)}
  hint = "run python docs/apigen.py"
  assert set(summary) == set(names), (
    f"{page.name}: missing {sorted(set(names) - set(summary))}, "
    f"not in __all__ {sorted(set(summary) - set(names))}; {hint}"
  )
  assert entries == set(names) - modules, (
    f"{page.name}: no entry for {sorted(set(names) - modules - entries)}, "
    f"entries not in __all__ {sorted(entries - set(names))}; {hint}"
  )


def test_the_reference_pages_are_the_generated_ones():
  want = apigen.pages()
  have = {p.name: p.read_text() for p in (DOCS / "api").glob("*.md")}
  assert set(have) == set(want), f"pages {sorted(set(have) ^ set(want))}: run docs/apigen.py"
  stale = sorted(name for name in want if have[name] != want[name])
  assert not stale, f"out of date: {stale}; run python docs/apigen.py"


def test_the_site_builds_with_warnings_as_errors_and_every_reference_resolved(tmp_path):
  pytest.importorskip("sphinx", reason="sphinx is not installed (pip install jhash[test])")
  for extension in ("myst_parser", "sphinx_book_theme"):
    assert importlib.util.find_spec(extension), f"{extension} is missing: pip install jhash[test]"
  html = tmp_path / "html"
  command = [sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-j", "1", "-q"]
  command += ["-b", "html", "-d", str(tmp_path / "doctrees"), str(DOCS), str(html)]
  start = time.monotonic()
  out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_SECONDS)
  seconds = time.monotonic() - start
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
  print(f"the site built in {seconds:.0f} s")

  from sphinx.util.inventory import InventoryFile

  with open(html / "objects.inv", "rb") as f:
    inventory = InventoryFile.load(f, "", posixpath.join)
  found = {
    name for kind, objects in inventory.items() if kind.startswith("py:") for name in objects
  }
  absent = [
    f"{modname}.{name}"
    for modname in MODULES
    for name in importlib.import_module(modname).__all__
    if f"{modname}.{name}" not in found
  ]
  assert not absent, f"built reference lacks {absent}"
  assert not [m for m in MODULES if m not in inventory["py:module"]]

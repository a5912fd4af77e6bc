"""The API reference pages, ``docs/api/*.md``: one per public module, listing its ``__all__``.

``python docs/apigen.py`` rewrites them; ``tests/test_docs.py`` checks that every page
lists exactly its module's ``__all__`` and that the site builds. ``conf.py`` documents
constants with ``attribute_doc``, which finds a constant's doc comment where it is
assigned (autodoc would look in the re-exporting package only).

A public module is a module of jhash whose dotted name has no part starting with an
underscore. Each page holds the module's docstring, a summary table of its ``__all__`` and
one entry per name. An object in the ``__all__`` of several modules (``jhash.HashingMethod``
is ``jhash.methods.HashingMethod``) is documented in full on the first page of ``MODULES``
that lists it; the later pages hold a short entry pointing there.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil
import types

DOCS = pathlib.Path(__file__).resolve().parent
API = DOCS / "api"

# The order of the pages: the package, then the layers from codes to methods and training,
# data, the native kernels, files, and the methods' parts.
ORDER = (
  "jhash",
  "jhash.codes",
  "jhash.search",
  "jhash.index",
  "jhash.metrics",
  "jhash.methods",
  "jhash.losses",
  "jhash.models",
  "jhash.coder",
  "jhash.training",
  "jhash.data",
  "jhash.native",
  "jhash.files",
  "jhash.distributed",
)


def public_modules() -> list[str]:
  """Every public module of jhash, in page order (modules missing from ``ORDER`` last)."""
  import jhash

  found = ["jhash"] + [
    info.name
    for info in pkgutil.walk_packages(jhash.__path__, "jhash.")
    if not any(part.startswith("_") for part in info.name.split(".")[1:])
  ]
  rank = {name: i for i, name in enumerate(ORDER)}
  return sorted(found, key=lambda name: (rank.get(name, len(ORDER)), name))


def _source_of(modname: str, name: str) -> tuple[str, str]:
  """The module and name where ``modname.name`` is assigned (following ``from X import``)."""
  module = importlib.import_module(modname)
  tree = ast.parse(inspect.getsource(module))
  for node in tree.body:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      for alias in node.names:
        if (alias.asname or alias.name) == name:
          return _source_of(node.module, alias.name)
  return modname, name


def attribute_doc(modname: str, name: str) -> list[str]:
  """The doc of the constant ``modname.name``, as lines: the ``#:`` comment lines just above
  its assignment, a ``#:`` comment ending that line, or a string just below it (the forms
  autodoc reads), found where it is assigned."""
  source, attr = _source_of(modname, name)
  text = inspect.getsource(importlib.import_module(source))
  lines = text.splitlines()
  body = ast.parse(text).body
  for i, node in enumerate(body):
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not any(
      isinstance(t, ast.Name) and t.id == attr for t in targets
    ):
      continue
    above = []
    j = node.lineno - 2
    while j >= 0 and lines[j].lstrip().startswith("#:"):
      above.insert(0, lines[j].lstrip()[2:].strip())
      j -= 1
    if above:
      return above
    _, inline, comment = lines[node.end_lineno - 1].partition("  #: ")
    if inline:
      return [comment.strip()]
    after = body[i + 1] if i + 1 < len(body) else None
    if isinstance(after, ast.Expr) and isinstance(getattr(after, "value", None), ast.Constant):
      if isinstance(after.value.value, str):
        return [line for line in inspect.cleandoc(after.value.value).splitlines() if line]
    return []
  return []


def _kind(obj) -> str:
  if isinstance(obj, types.ModuleType):
    return "module"
  if inspect.isclass(obj):
    return "exception" if issubclass(obj, BaseException) else "class"
  if callable(obj):
    return "function"
  return "data"


def entries() -> dict[str, list[tuple[str, str, str | None]]]:
  """module -> [(name, kind, home)] in ``__all__`` order; ``home`` is the full name of the
  entry that documents the same object in full (None: this one does)."""
  seen: dict[int, str] = {}
  out = {}
  for modname in public_modules():
    module = importlib.import_module(modname)
    if not hasattr(module, "__all__"):  # tests/test_docs.py names it
      print(f"apigen: {modname} has no __all__; no page written for it")
      continue
    rows = []
    for name in module.__all__:
      obj = getattr(module, name)
      kind = _kind(obj)
      home = None
      if kind in ("class", "exception", "function"):
        home = seen.setdefault(id(obj), f"{modname}.{name}")
        home = None if home == f"{modname}.{name}" else home
      rows.append((name, kind, home))
    out[modname] = rows
  return out


_ROLE = {"class": "class", "exception": "exc", "function": "func"}


def _entry(modname: str, name: str, kind: str, home: str | None) -> list[str]:
  obj = getattr(importlib.import_module(modname), name)
  if home is not None:
    directive = {"class": "class", "exception": "exception", "function": "function"}[kind]
    return [f".. py:{directive}:: {name}", "", f"   The same object as :{_ROLE[kind]}:`{home}`."]
  if kind == "data":
    lines = [f".. autodata:: {name}"]
    if " at 0x" in repr(obj):  # holds functions: their repr is an address
      lines.append("   :no-value:")
    return lines
  if kind in ("class", "exception"):
    return [f".. autoclass:: {name}", "   :members:"]
  return [f".. autofunction:: {name}"]


def page(modname: str, rows: list[tuple[str, str, str | None]]) -> str:
  """The reference page of one module."""
  lines = [
    f"# `{modname}`",
    "",
    "```{eval-rst}",
    f".. automodule:: {modname}",
    "   :no-members:",
    "",
    ".. rubric:: Contents",
    "",
    ".. autosummary::",
    "   :nosignatures:",
    "",
  ]
  lines += [f"   {name}" for name, _, _ in rows]
  for name, kind, home in rows:
    if kind != "module":
      lines += [""] + _entry(modname, name, kind, home)
  lines += ["```", ""]
  return "\n".join(lines)


def page_name(modname: str) -> str:
  return f"{modname}.md"


def index(modules: list[str]) -> str:
  lines = [
    "# API reference",
    "",
    "One page per public module, listing exactly the names in its `__all__`.",
    "",
    "```{toctree}",
    ":maxdepth: 1",
    "",
  ]
  lines += [modname for modname in modules]
  lines += ["```", ""]
  return "\n".join(lines)


def pages() -> dict[str, str]:
  """File name (in ``docs/api``) -> text, for every page of the reference."""
  table = entries()
  out = {page_name(m): page(m, rows) for m, rows in table.items()}
  out["index.md"] = index(list(table))
  return out


def main() -> None:
  API.mkdir(exist_ok=True)
  want = pages()
  for stale in sorted(set(p.name for p in API.glob("*.md")) - set(want)):
    (API / stale).unlink()
  for name, text in want.items():
    (API / name).write_text(text)
  print(f"wrote {len(want)} pages to {API.relative_to(DOCS.parent)}")


if __name__ == "__main__":
  main()

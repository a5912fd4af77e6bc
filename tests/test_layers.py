"""The import layers of jhash, and that experiments and benchmarks use public names only.

From the bottom: input checks, the minibatch order and the native CPU kernels; codes;
data; search and the index; metrics; the method API, models and losses; the shared train
step; methods; the runner (``fit``) and the network in a method's state; grid search, the
pure training function and saving over the runner. A module may import only
from the layers below its own (grimp's layer contract, the same as import-linter's).
Experiments and benchmarks sit above the package and import its public names, never a
private module.
"""

import ast
import pathlib

import grimp
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

LAYERS = (  # top first
  ("jhash.__main__",),
  ("jhash._cli",),
  ("jhash.evaluate",),
  ("jhash._evaluate_presets",),
  ("jhash._evaluate_files",),
  ("jhash._grid", "jhash._train", "jhash._saving", "jhash._local_minibatches"),
  ("jhash._encode", "jhash._fit_pipeline"),
  ("jhash._fit", "jhash._network"),
  ("jhash._fit_checks", "jhash._stream_checks"),
  ("jhash._loops", "jhash._shards"),
  ("jhash.methods",),
  ("jhash.coder",),
  ("jhash._coder_weights",),
  ("jhash.training",),
  ("jhash.models", "jhash.losses", "jhash._api"),
  ("jhash.metrics",),
  ("jhash.search", "jhash.index"),
  ("jhash.data",),
  ("jhash.codes", "jhash.distributed"),
  ("jhash._checks", "jhash._order", "jhash.native", "jhash.files"),
)


def _layers():
  return [grimp.Layer(*names, independent=True) for names in LAYERS]


def test_every_module_belongs_to_a_layer():
  graph = grimp.build_graph("jhash")
  placed = {name for layer in LAYERS for name in layer}
  loose = [
    m
    for m in graph.modules
    if m != "jhash" and not any(m == p or m.startswith(p + ".") for p in placed)
  ]
  assert not loose, f"modules outside every layer: {loose}"


def test_no_module_imports_a_layer_above_its_own():
  graph = grimp.build_graph("jhash")
  illegal = graph.find_illegal_dependencies_for_layers(layers=_layers())
  described = [f"{d.importer} -> {d.imported}" for d in illegal]
  assert not described, f"imports against the layers: {described}"


def test_the_contract_catches_an_upward_import(tmp_path):
  # The check itself can fail: a method importing the runner is reported.
  graph = grimp.build_graph("jhash")
  graph.add_import(importer="jhash.methods._lsh", imported="jhash._fit")
  illegal = graph.find_illegal_dependencies_for_layers(layers=_layers())
  assert {(d.importer, d.imported) for d in illegal} == {("jhash.methods", "jhash._fit")}


def _private_imports(path: pathlib.Path) -> list[str]:
  found = []
  for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
      names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    for name in names:
      parts = name.split(".")
      if parts[0] == "jhash" and any(p.startswith("_") for p in parts[1:]):
        found.append(f"{path.relative_to(ROOT)}: {name}")
    if (
      isinstance(node, ast.Attribute)
      and node.attr == "path"
      and isinstance(node.value, ast.Name)
      and node.value.id == "sys"
    ):
      found.append(f"{path.relative_to(ROOT)}: sys.path")
  return found


@pytest.mark.parametrize("folder", ["experiments", "benchmarks"])
def test_experiments_and_benchmarks_import_public_names_only(folder):
  offenders = [
    hit for path in sorted((ROOT / folder).rglob("*.py")) for hit in _private_imports(path)
  ]
  assert not offenders, offenders

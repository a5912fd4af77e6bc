"""The runnable examples in public docstrings run, so they cannot rot."""

import doctest

import pytest

import jhash

ENTRY_POINTS = [
  jhash.fit,
  jhash.encode,
  jhash.methods.pairwise,
  jhash.methods.classifier,
  jhash.methods.lsh,
  jhash.methods.itq,
  jhash.methods.cdh,
  jhash.methods.hbmp,
  jhash.methods.cvh,
  jhash.methods.scm,
  jhash.methods.cmfh,
  jhash.search.hamming_topk,
  jhash.metrics.mean_average_precision,
  jhash.methods.ksh,
  jhash.methods.hashnet,
  jhash.methods.adsh,
  jhash.methods.dch,
  jhash.methods.mmhh,
  jhash.methods.mch,
  jhash.native.export_checks,
  jhash.search.weight_units,
  jhash.make_train,
  jhash.save,
  jhash.network,
  jhash.codes.from_bits,
  jhash.codes.pack_bits,
]


def test_every_registered_method_has_its_example_run():
  # "mch" is registered as mch_of (a base named in a config); its example is mch's.
  factories = {
    name: jhash.methods.mch if name == "mch" else f for name, f in jhash.methods.REGISTRY.items()
  }
  missing = [name for name, f in factories.items() if f not in ENTRY_POINTS]
  assert not missing, missing


@pytest.mark.parametrize("fn", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_docstring_example_runs(fn):
  assert ">>>" in (fn.__doc__ or ""), f"{fn.__qualname__} has no example"
  finder = doctest.DocTestFinder(recurse=False)
  runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
  for test in finder.find(fn, fn.__qualname__, globs={}):
    runner.run(test)
  result = runner.summarize(verbose=False)
  assert result.attempted > 0 and result.failed == 0, result

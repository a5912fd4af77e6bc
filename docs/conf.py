"""Sphinx configuration of jhash's documentation (MyST Markdown, autodoc, no network).

Build: ``python -m sphinx -W -n --keep-going -b html docs OUTDIR``. The API pages in
``docs/api`` come from ``python docs/apigen.py``.
"""

import pathlib
import sys
import typing

DOCS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

import apigen  # noqa: E402

import jhash  # noqa: E402

project = "jhash"
author = "jhash authors"
copyright = "jhash authors"
release = jhash.__version__
version = release

extensions = [
  "myst_parser",
  "sphinx.ext.autodoc",
  "sphinx.ext.autosummary",
  "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**/__pycache__"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# autodoc: members in the order of the source; NamedTuple fields are described in their
# class's docstring (autodoc would list each as "Alias for field number N").
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# Nitpicky mode: every reference must resolve. Names outside jhash (JAX, NumPy, optax,
# Flax, the standard library) are not in this site and there is no network for
# intersphinx, so those are ignored; a jhash name that does not resolve is an error.
nitpicky = True
nitpick_ignore_regex = [
  ("py:.*", r"(jax|jaxlib|numpy|optax|flax)\..*"),
  ("py:.*", r"(collections\.abc|concurrent\.futures|os|pathlib)\..*"),
]

html_theme = "sphinx_book_theme"
html_title = "jhash"
html_static_path = []
html_theme_options = {"show_toc_level": 2}


def _skip_member(app, what, name, obj, skip, options):
  doc = getattr(obj, "__doc__", None) or ""
  if doc.startswith("Alias for field number"):  # a NamedTuple field
    return True
  return None


def _namedtuple_signature(app, what, name, obj, options, signature, return_annotation):
  # A NamedTuple's signature is that of its generated __new__, whose string annotations
  # autodoc evaluates in the wrong namespace (``coder_lib.Coder`` stays a string); the
  # class's own type hints, evaluated in its module, name the real types.
  if what != "class" or not (isinstance(obj, type) and issubclass(obj, tuple)):
    return None
  if not hasattr(obj, "_fields"):
    return None
  from sphinx.util.typing import stringify_annotation

  hints = typing.get_type_hints(obj)
  params = []
  for field in obj._fields:
    text = field
    if field in hints:
      text += ": " + stringify_annotation(hints[field], "smart")
    if field in obj._field_defaults:
      text += " = " + repr(obj._field_defaults[field])
    params.append(text)
  return "(" + ", ".join(params) + ")", return_annotation


def _constant_doc(app, what, name, obj, options, lines):
  if what == "data" and name.startswith("jhash."):
    modname, _, attr = name.rpartition(".")
    lines[:] = apigen.attribute_doc(modname, attr)


def setup(app):
  app.connect("autodoc-skip-member", _skip_member)
  app.connect("autodoc-process-signature", _namedtuple_signature)
  app.connect("autodoc-process-docstring", _constant_doc)

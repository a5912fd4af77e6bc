"""A stop asked by a signal (Ctrl-C, or a scheduler's SIGTERM), for the experiment runner.

The handler remembers the stop and, once the runner has imported what it needs
(``arm``), raises ``KeyboardInterrupt`` where the signal arrives; before that (a stop
while Python imports NumPy or JAX, which an exception there leaves half done, with
tracebacks) the stop waits for ``arm``. Python drops an exception raised inside a
garbage-collection callback (JAX registers one) and goes on, so the runner checks again
between cells and after each round trip of training (``check``) and stops there.
"""

from __future__ import annotations

import signal
import sys

_asked = False
_armed = False


def _handler(signum, frame) -> None:
  del signum, frame
  global _asked
  _asked = True
  if _armed:
    raise KeyboardInterrupt


def install() -> None:
  """SIGINT and SIGTERM stop the run as Ctrl-C does (also where a shell started it
  ignoring SIGINT); the stop that Python drops is not printed ("Exception ignored"):
  ``check`` raises it again."""
  signal.signal(signal.SIGTERM, _handler)
  signal.signal(signal.SIGINT, _handler)
  before = sys.unraisablehook

  def hook(unraisable):
    if not (_asked and isinstance(unraisable.exc_value, KeyboardInterrupt)):
      before(unraisable)

  sys.unraisablehook = hook


def arm() -> None:
  """From now on a signal raises where it arrives; one that came before stops here."""
  global _armed
  _armed = True
  check()


def asked() -> bool:
  """Whether a signal asked the run to stop (an error that follows is its consequence:
  a module whose import it cut short, say)."""
  return _asked


def check() -> None:
  """Raise ``KeyboardInterrupt`` when a signal asked the run to stop (the first raise may
  have been dropped)."""
  if _asked:
    raise KeyboardInterrupt

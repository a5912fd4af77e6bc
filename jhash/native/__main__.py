"""``python -m jhash.native``: build the native CPU kernels now and say where they are."""

import sys

from jhash import native

if __name__ == "__main__":
  try:
    path = native.build(verbose="-v" in sys.argv)
  except RuntimeError as err:
    print(f"jhash native kernels not built: {err}", file=sys.stderr)
    sys.exit(1)
  print(f"jhash native kernels: {path}")

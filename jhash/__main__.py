"""``python -m jhash SUBCOMMAND``: the ``jhash`` command without its console script."""

import sys

from jhash._cli import main

if __name__ == "__main__":
  sys.exit(main())

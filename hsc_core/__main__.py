"""``python -m hsc_core COMMAND …`` is the same as ``hsc COMMAND …``."""

import sys

from .cli import main

sys.exit(main(prog="python -m hsc_core"))

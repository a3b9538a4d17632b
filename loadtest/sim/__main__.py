"""``python -m loadtest.sim ARGS``: the same as ``loadtest sim ARGS``.

It hands over to the command (``python -m loadtest sim``) by replacing this process,
not by importing the command line: the simulator imports nothing of the CLI.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, "-m", "loadtest", "sim", *sys.argv[1:]])

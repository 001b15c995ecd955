"""python3 -m tools.kubeapi --state-dir DIR [options]: the server on its own."""

import sys

from .cli import main

sys.exit(main())

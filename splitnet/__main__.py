"""``python -m splitnet ...`` is the ``splitnet`` command."""

import sys

from .cli import main

sys.exit(main())

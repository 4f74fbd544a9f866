"""``python3 -m splitnet.dev COMMAND``: the developer tools (``regen``, ``mutate``)."""

import sys

from .regen import main

__all__ = []

sys.exit(main())

"""Writing files so that a crash never leaves half of one: temp file in the same folder, then
``os.replace`` (atomic on POSIX)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_savefig(fig, path, close: bool = True, **savefig_kwargs) -> Path:
    """``fig.savefig`` to ``path`` atomically (PNG unless ``format`` is given); closes ``fig``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = savefig_kwargs.pop("format", None) or (path.suffix.lstrip(".") or "png")
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=f".{fmt}")
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt, **savefig_kwargs)
        # mkstemp makes the file 0600; give it the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if close:
            import matplotlib.pyplot as plt

            plt.close(fig)
    return path

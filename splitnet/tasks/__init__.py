"""What a run learns, as objects (``sn.tasks``): :class:`~splitnet.tasks.task.Task` and the
registry :data:`TASKS` (``{"lm": ..., "mlm": ..., "translate": ...}``).

* :mod:`~splitnet.tasks.task` -- the Task interface, :func:`register`, the one check of options
  per task.
* :mod:`~splitnet.tasks.lm` -- ``lm`` (next byte) and ``mlm`` (masked bytes).
* :mod:`~splitnet.tasks.translation` -- ``translate`` (an encoder–decoder on sentence pairs).
* :mod:`~splitnet.tasks.losses` -- the language-model loss (plain and chunked).

A new task is one file: a subclass of ``Task`` and ``register(MyTask())``
(docs/architecture.md).
"""

from . import lm, translation  # noqa: F401 - the built-in tasks register themselves
from .task import TASKS, Task, get_task, register

__all__ = ["TASKS", "Task", "get_task", "register"]

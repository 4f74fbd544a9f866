"""One module per command of ``splitnet``: ``cmd_<name>.py`` with ``HELP``, ``RANK``,
``configure(parser)``, ``run(args)`` (and ``VERDICT`` when it can exit 1). :mod:`splitnet.cli`
finds them here by their file names: a command is one file in this folder."""

__all__ = []   # a folder of commands: splitnet.cli imports each by name

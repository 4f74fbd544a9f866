"""How much work the configuration costs before a run's first training step (issue 59).

Runs ``splitnet train ARGS`` in this process (default ``--scheme strang --steps 1``, a temporary
``--out``) under a profile hook until the trainer's first step begins, and counts:

* scheme resolutions: calls of ``splitnet.integrators.schemes``' ``resolve``, ``get``,
  ``network_scheme`` and ``from_pattern`` entered from outside that module (a name or a spec
  turned into a scheme object);
* ``SplittingScheme`` objects built (their ``__init__`` entered);
* network-config validations (``__post_init__`` of ``SplitConfig`` / ``Seq2SeqConfig``);
* ``layer_fields`` calls (one layer planned);
* file stays and folder moves: the package's functions entered from another file (imports left
  out: a module's body and what it calls while it is imported; a comprehension is its
  function's), in order, merged into runs of one file (a *stay*); a *move* is a stay whose
  folder differs from the one before.

``--json FILE`` writes the counts. One run: the counts are deterministic.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path

PKG = str(Path(__file__).resolve().parents[1] / "splitnet")


class _Stop(Exception):
    pass


def _folder(path: str) -> str:
    rel = os.path.relpath(path, PKG)
    return os.path.dirname(rel) or "."


def profile(argv: list[str]) -> dict:
    """The counts for ``splitnet train`` with ``argv``, up to the first step."""
    import splitnet.integrators.schemes as schemes_mod
    from splitnet.cli import main

    counts = {"resolutions": 0, "schemes_built": 0, "config_validations": 0,
              "layer_fields": 0}
    files: list[str] = []
    schemes_file = schemes_mod.__file__

    importing = [0]       # package modules being imported (their bodies and what they call)

    def hook(frame, event, arg):
        code = frame.f_code
        fn = code.co_filename
        if not fn.startswith(PKG):
            return
        name = code.co_name
        if name == "<module>":          # an import: the cost of importing, not of configuring
            importing[0] += 1 if event == "call" else -1 if event == "return" else 0
            return
        if event != "call" or importing[0]:
            return
        if name == "_train_step" and fn.endswith(os.path.join("training", "train.py")):
            raise _Stop
        caller = frame.f_back
        # a call inside one file (a helper, a comprehension) is a stay, not a move: only calls
        # from another file enter the path
        if not name.startswith("<") and (caller is None or caller.f_code.co_filename != fn) \
                and (not files or files[-1] != fn):
            files.append(fn)
        if fn == schemes_file and name in ("resolve", "get", "network_scheme", "from_pattern"):
            caller = frame.f_back
            if caller is None or caller.f_code.co_filename != schemes_file:
                counts["resolutions"] += 1
        elif name == "__init__" and "self" in frame.f_locals:
            from splitnet.integrators.splitting import SplittingScheme

            obj = frame.f_locals["self"]
            if isinstance(obj, SplittingScheme) and type(obj).__init__ is code_of(obj):
                counts["schemes_built"] += 1
        elif name == "__post_init__" and "self" in frame.f_locals:
            if type(frame.f_locals["self"]).__name__ in ("SplitConfig", "Seq2SeqConfig"):
                counts["config_validations"] += 1
        elif name == "layer_fields" and fn.endswith("plan.py"):
            counts["layer_fields"] += 1

    seen_init: dict[type, object] = {}

    def code_of(obj):
        t = type(obj)
        if t not in seen_init:
            seen_init[t] = t.__init__
        return seen_init[t]

    with tempfile.TemporaryDirectory() as out:
        sys.setprofile(hook)
        try:
            main(["train", *argv, "--out", os.path.join(out, "run"), "--no-progress"])
        except _Stop:
            pass
        finally:
            sys.setprofile(None)
    folders = [_folder(f) for f in files]
    moves = sum(1 for a, b in itertools.pairwise(folders) if a != b)
    return {**counts, "files": len(set(files)), "folders": len(set(folders)),
            "file_stays": len(files), "folder_moves": moves}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="write the counts to FILE")
    ap.add_argument("train_args", nargs=argparse.REMAINDER,
                    help="arguments of splitnet train after -- (default --scheme strang "
                         "--steps 1)")
    args = ap.parse_args(argv)
    extra = [a for a in args.train_args if a != "--"] or ["--scheme", "strang", "--steps", "1"]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    res = profile(extra)
    for k, v in res.items():
        print(f"{k:20s} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

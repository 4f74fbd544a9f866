"""``splitnet export``: a trained checkpoint as a Hugging Face model directory."""

from __future__ import annotations

import sys

from ._args import nonempty

RANK = 70   # place in `splitnet --help`
HELP = "write a checkpoint as a Hugging Face model directory"
FORMATS = ("auto", "gpt2", "splitnet")
TOLERANCE = 1e-4   # float32 logits of the same maths through two code paths


def configure(p) -> None:
    p.description = (
        "Write the model of a 'splitnet train' checkpoint as a Hugging Face directory "
        "(config.json, model.safetensors, and a byte tokenizer) that transformers' "
        "AutoModelForCausalLM.from_pretrained loads with the same logits. A Lie-Trotter model "
        "with Euler sub-steps at h = 1 is written as a standard GPT-2; any other scheme as a "
        "'splitnet' model (load it with 'import splitnet.hf'). Needs: pip install "
        "'splitnet[hf]'.")
    p.add_argument("--checkpoint", metavar="DIR", type=nonempty, required=True,
                   help="directory holding checkpoint.pt from 'splitnet train' (or the file)")
    p.add_argument("--out", metavar="HFDIR", type=nonempty, required=True,
                   help="directory to write (created; must be empty unless --overwrite)")
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="gpt2 (only for a model that is exactly one), splitnet (any model), or "
                        "auto: gpt2 when exact, else splitnet (default auto)")
    p.add_argument("--overwrite", action="store_true",
                   help="write into a directory that already holds files")
    p.add_argument("--trust-checkpoint", action="store_true",
                   help="load a checkpoint that holds Python objects (an old format); only for "
                        "files from a trusted source")


def _check_out(args):
    """The output directory: absent, empty, or --overwrite; its nearest existing folder
    writable (tried for real)."""
    from pathlib import Path

    from .._io import require_writable_dir

    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not args.overwrite:
        raise ValueError(f"--out {out} is not empty: pass --overwrite to write into it")
    require_writable_dir(out)
    return out


def run(args) -> int:
    import torch

    from ..checkpoint import load_model
    from ..config import require

    out = _check_out(args)
    model = load_model(args.checkpoint, trust=args.trust_checkpoint)
    require("transformers", "safetensors", extra="hf", feature="splitnet export")
    from transformers.utils import logging as hf_logging

    from .. import interop

    hf_logging.disable_progress_bar()      # our own two lines say what happened

    why = interop.gpt2_mismatch(model)
    if args.format == "gpt2" and why:
        raise ValueError(f"the model is not a GPT-2 ({why}); use --format splitnet or auto")
    fmt = interop.to_hf(model, out, format=args.format)
    # Read it back as transformers would, and compare the logits on a few tokens.
    from transformers import AutoModelForCausalLM

    back = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    idx = torch.randint(0, model.vocab_size, (1, min(16, model.max_len)),
                        generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = float((back(idx).logits - model(idx)).abs().max())
    kind = ("a standard GPT-2" if fmt == "gpt2" else
            f"a splitnet model ({why or 'as asked'}); load it with 'import splitnet.hf'")
    print(f"wrote {out} as {kind}")
    print(f"read back with AutoModelForCausalLM: max |logit difference| = {diff:.3g} on "
          f"{idx.shape[1]} tokens")
    if not diff <= TOLERANCE:
        print(f"splitnet export: the model read back differs (more than {TOLERANCE:g})",
              file=sys.stderr)
        return 1
    return 0


__all__ = ["FORMATS", "HELP", "RANK", "TOLERANCE", "configure", "run"]

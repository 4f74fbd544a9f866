"""``splitnet export``: a trained checkpoint as a Hugging Face model directory."""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager

from ...configs.options import EXPORT_FORMATS
from .._args import add_model_source, add_output_option, add_threads_option, set_threads

RANK = 70   # place in `splitnet --help`
HELP = "write a checkpoint as a Hugging Face model directory"
FORMATS = EXPORT_FORMATS
TOLERANCE = 1e-4   # float32 logits of the same maths through two code paths
VERDICT = f"the model read back differs by more than {TOLERANCE:g} in its logits"


def configure(p) -> None:
    p.description = (
        "Write the model of a 'splitnet train' checkpoint as a Hugging Face directory "
        "(config.json, model.safetensors, and a byte tokenizer) that transformers' "
        "AutoModelForCausalLM.from_pretrained loads with the same logits. A Lie-Trotter model "
        "with Euler sub-steps at h = 1 is written as a standard GPT-2, or with Llama's parts "
        "(--norm rms --convection-field swiglu --positions none --rotary-pct 1) as a Llama, "
        "Qwen2, Qwen3 or OLMo 2 model; any other scheme as a 'splitnet' model (load it with "
        "'import splitnet.interop.hf'). The files are written to a "
        "temporary folder beside HFDIR and moved in only when complete and read back: a full "
        "disk, Ctrl-C or SIGTERM leaves HFDIR as it was. Needs: pip install 'splitnet[hf]'.")
    add_model_source(p)
    add_output_option(p, "--out", "directory to write (created; must be empty unless "
                      "--overwrite)", metavar="HFDIR", required=True)
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="gpt2, llama, qwen2, qwen3 or olmo2 (only for a model that is exactly "
                        "one), splitnet (any model), or auto: the first of these that is exact, "
                        "else splitnet (default auto)")
    p.add_argument("--overwrite", action="store_true",
                   help="write into a directory that already holds files")
    add_threads_option(p)


def _check_out(args):
    """The output directory: absent, empty, or --overwrite; its nearest existing folder
    writable (tried for real)."""
    from pathlib import Path

    from ..._io import check_not_inputs, require_writable_dir
    from ...runs.checkpoint import run_files

    out = Path(args.out).expanduser()
    check_not_inputs([("--out", out)], run_files(args.checkpoint))
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not args.overwrite:
        raise ValueError(f"--out {out} is not empty: pass --overwrite to write into it")
    from ...runs import checkpoint as ck

    for folder in (out.resolve(), out.resolve().parent):
        if any((folder / n).exists() for n in (ck.CKPT, ck.METRICS, ck.LOCK)):
            # a model folder in (or under) a run's folder outlives the run: 'train
            # --overwrite' moves the run aside, and 'sample --hf' would read the old weights
            where = "holds" if folder == out.resolve() else f"is inside {folder}, which holds"
            raise ValueError(f"--out {out} {where} a training run: give the model a folder "
                             f"of its own")
    require_writable_dir(out)
    return out


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (a job scheduler, ``kill``) stops the export like Ctrl-C: the temporary
    directory is removed and the command says so (exit 130), instead of dying half-written."""
    def handle(signum, frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, handle)
    except ValueError:                      # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _write(model, out, fmt: str):
    """The model written to a temporary directory beside ``out``, read back as transformers
    would and compared on a few tokens, then moved into ``out`` (file by file with
    --overwrite). Any failure, a full disk or a signal leaves ``out`` as it was. Returns (the
    format written, max |logit difference|, tokens compared)."""
    import torch
    from transformers import AutoModelForCausalLM

    from ... import interop
    from ..._io import atomic_directory, write_failure

    try:
        with atomic_directory(out) as tmp:
            written = interop.to_hf(model, tmp, format=fmt)
            back = AutoModelForCausalLM.from_pretrained(tmp, local_files_only=True).eval()
            idx = torch.randint(0, model.vocab_size, (1, min(16, model.max_len)),
                                generator=torch.Generator().manual_seed(0))
            with torch.no_grad():
                diff = float((back(idx).logits - model(idx)).abs().max())
    except Exception as e:
        failure = write_failure(e, out)
        if failure is None:
            raise
        raise failure from None
    return written, diff, idx.shape[1]


def run(args) -> int:
    from ...configs.config import require
    from ...runs.checkpoint import load_model

    out = _check_out(args)
    set_threads(args.threads)
    model = load_model(args.checkpoint, trust=args.trust_checkpoint)
    if hasattr(model, "decoder_layers"):
        raise ValueError(f"{args.checkpoint} holds a translation model (an encoder–decoder, "
                         f"SplitSeq2Seq); export writes language models only (SplitTransformer: "
                         f"a GPT-2 or a 'splitnet' causal LM); translate with 'splitnet "
                         f"translate --checkpoint {args.checkpoint}'")
    require("transformers", "safetensors", extra="hf", feature="splitnet export")
    from transformers.utils import logging as hf_logging

    from ... import interop
    from ...interop.llama import llama_mismatch

    hf_logging.disable_progress_bar()      # our own two lines say what happened

    why = interop.gpt2_mismatch(model)
    if args.format == "gpt2" and why:
        raise ValueError(f"the model is not a GPT-2 ({why}); use --format splitnet or auto")
    if args.format not in ("gpt2", "splitnet", "auto"):
        other = llama_mismatch(model, args.format)
        if other:
            raise ValueError(f"the model is not a {args.format} model ({other}); use --format "
                             f"splitnet or auto")
    with _sigterm_as_interrupt():
        fmt, diff, n = _write(model, out, args.format)
    kind = ("a standard GPT-2" if fmt == "gpt2" else f"a standard {fmt} model"
            if fmt != "splitnet" else f"a splitnet model ({why or 'as asked'}); load it with "
            f"'import splitnet.interop.hf'")
    print(f"wrote {out} as {kind}")
    print(f"read back with AutoModelForCausalLM: max |logit difference| = {diff:.3g} on "
          f"{n} tokens")
    if not diff <= TOLERANCE:
        print(f"splitnet export: the model read back differs (more than {TOLERANCE:g})",
              file=sys.stderr)
        return 1
    return 0


__all__ = ["FORMATS", "HELP", "RANK", "TOLERANCE", "VERDICT", "configure", "run"]

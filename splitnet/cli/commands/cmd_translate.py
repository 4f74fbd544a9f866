"""``splitnet translate``: source lines in, one translation per line out (a checkpoint of
``splitnet train --task translate``)."""

from __future__ import annotations

import sys

from .._args import (
    add_device_option,
    add_model_source,
    add_progress_option,
    add_threads_option,
    beam_width,
    check_only_with,
    float_in,
    positive_int,
    set_threads,
    shows_progress,
    torch_device,
)
from .._depth import add_at_depth_option, at_depth_of

RANK = 65   # place in `splitnet --help`
HELP = "translate lines with a checkpoint of 'splitnet train --task translate'"
MAX_LINE = 1 << 20     # bytes of one input line (a binary file has no line ends to stop at)


def configure(p) -> None:
    p.description = (
        "Read source sentences, one per line, from --input or stdin, and write one translation "
        "per line to stdout (an empty line gives an empty line), in batches as the lines "
        "arrive: beam search with the encoder run once per batch, the memory's keys and values "
        "once per cross-attention module and a key/value cache per self-attention evaluation "
        "(splitnet.nets.decoding). With --reference, BLEU and chrF (sacrebleu) go to stderr.")
    add_model_source(p, task=" --task translate")
    p.add_argument("--input", metavar="FILE", default=None,
                   help="source lines (UTF-8; default: stdin)")
    p.add_argument("--reference", metavar="FILE", default=None,
                   help="reference translations, one per input line: print BLEU and chrF")
    p.add_argument("--beam", type=beam_width, default=4, metavar="K",
                   help="beam width, 1 = greedy (default 4)")
    p.add_argument("--length-penalty", type=float_in(-10.0, 10.0), default=None, metavar="A",
                   help="beam search ranks log p / length^A (default 0.6; the seed used 1.0 on "
                        "IWSLT, 0.6 on WMT)")
    p.add_argument("--max-new-tokens", type=positive_int, default=None, metavar="N",
                   help="tokens per translation at most (default: the model's max_len)")
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="B",
                   help="lines translated together (default 32)")
    add_at_depth_option(p)
    add_device_option(p)
    add_progress_option(p)
    add_threads_option(p)


def _text_lines(path: str | None, what: str):
    """The lines of ``path`` (or stdin), without their line ends; a file that is not UTF-8
    text (a NUL byte, invalid UTF-8, a line over a MiB) is a ValueError naming it."""
    name = path or "stdin"
    try:
        stream = open(path, "rb") if path else sys.stdin.buffer
    except OSError as e:           # permission, say: the system's reason, not its errno
        raise ValueError(f"{what} {name}: {e.strerror or e}") from None
    try:
        for n, raw in enumerate(iter(lambda: stream.readline(MAX_LINE + 1), b""), 1):
            if len(raw) > MAX_LINE or b"\0" in raw:
                raise ValueError(f"{what} {name} line {n} is not text (a NUL byte, or over "
                                 f"{MAX_LINE:,} bytes without a line end)")
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise ValueError(f"{what} {name} line {n} is not UTF-8") from None
    finally:
        if path:
            stream.close()


def _open_checks(args) -> dict[str, str]:
    """``{flag: kind}`` of --input and --reference by the one rule for inputs
    (:func:`splitnet._io.input_kind`): a file, or a stream read once (a pipe, ``/dev/stdin``,
    ``/dev/null``); a folder, a socket or a missing name is one line naming the option."""
    from ..._io import input_kind

    return {flag: input_kind(path, flag, stream=True)
            for flag, path in (("--input", args.input), ("--reference", args.reference))
            if path is not None}


def _load(args, device):
    from ...runs.checkpoint import load, model_from_state
    from ...translate.batches import tokenizer_from_dict

    state = load(args.checkpoint, trust=args.trust_checkpoint)
    if state.get("model_kind", "lm") != "seq2seq" or state.get("tokenizer") is None:
        # the pointer must lead somewhere that takes this model: sample refuses a masked LM
        from ...tasks import TASKS

        task = TASKS.get((state.get("train_config") or {}).get("task", "lm"), TASKS["lm"])
        raise ValueError(f"{args.checkpoint} holds {task.noun}, not a translation model (train "
                         f"one with 'splitnet train --task translate'; {task.reader})")
    model = model_from_state(state, args.checkpoint).to(device).eval()
    return model, tokenizer_from_dict(state["tokenizer"])


# options that only apply alongside another (splitnet.cli._args.check_only_with)
ONLY_WITH = {"length_penalty": ("with --beam > 1 (greedy decoding ranks no hypotheses)",
                                lambda a: a.beam > 1)}


def run(args) -> int:
    from ...translate.translation import translate_lines

    check_only_with(args, ONLY_WITH)
    args.length_penalty = 0.6 if args.length_penalty is None else args.length_penalty

    kinds = _open_checks(args)
    if args.reference is not None:        # before any line is translated
        from ...configs.config import require

        require("sacrebleu", extra="translate", feature="--reference (BLEU and chrF)")
    refs = list(_text_lines(args.reference, "--reference")) if args.reference else None
    # a file is read once first (a bad file or line count writes nothing); a stream, like
    # stdin, can be read only once: translated as it arrives, its count checked at the end
    if kinds.get("--input") == "file":
        n = sum(1 for _ in _text_lines(args.input, "--input"))
        if refs is not None and n != len(refs):
            raise ValueError(f"--reference has {len(refs)} lines but --input has {n}: one "
                             f"reference per input line")
    device = torch_device(args.device)
    set_threads(args.threads)
    model, tok = _load(args, device)
    model = at_depth_of(model, args.at_depth)
    show = shows_progress(args.progress)
    from tqdm.auto import tqdm

    bar = tqdm(total=len(refs) if refs else None, unit="line", disable=not show,
               file=sys.stderr, desc="translate")
    hyps, batch = [], []

    def flush():
        out = translate_lines(model, tok, batch, args.beam, args.length_penalty,
                              args.max_new_tokens, args.batch_size, device)
        sys.stdout.write("".join(line.replace("\n", " ") + "\n" for line in out))
        sys.stdout.flush()
        hyps.extend(out)
        bar.update(len(batch))
        batch.clear()

    for line in _text_lines(args.input, "--input"):
        batch.append(line)
        if len(batch) == args.batch_size:
            flush()
    if batch:
        flush()
    bar.close()
    if refs is not None:
        _scores(hyps, refs)
    return 0


def _scores(hyps: list[str], refs: list[str]) -> None:
    from ...translate.scores import bleu_chrf

    if len(hyps) != len(refs):
        raise ValueError(f"--reference has {len(refs)} lines but the input had {len(hyps)}: "
                         f"one reference per input line")
    s = bleu_chrf(hyps, refs)
    print(f"BLEU {s['bleu']:.2f}  chrF {s['chrf']:.2f}  ({len(hyps)} lines; "
          f"{s['signature']})", file=sys.stderr)


__all__ = ["HELP", "MAX_LINE", "ONLY_WITH", "RANK", "configure", "run"]

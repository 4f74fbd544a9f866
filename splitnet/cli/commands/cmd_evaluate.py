"""``splitnet evaluate``: a masked language model's encoder scored on offline tasks (a linear
probe beside a bag-of-words regression and the majority class: splitnet.mlm.suite)."""

from __future__ import annotations

import sys

from .._args import (
    add_device_option,
    add_model_source,
    add_output_option,
    add_progress_option,
    add_threads_option,
    nonempty,
    positive_int,
    seed,
    set_threads,
    shows_progress,
    torch_device,
)
from .._depth import add_at_depth_option, at_depth_of

RANK = 62   # place in `splitnet --help`
HELP = "score a masked language model's encoder on offline WordNet tasks"


def configure(p) -> None:
    p.description = (
        "Score the encoder of a 'splitnet train --task mlm' checkpoint on tasks built from "
        "WordNet 3.0 ('apt-get install wordnet-base'), split so no synset or lemma is in both "
        "train and test: wn-lex (a definition -> one of 45 lexicographer classes) and wic-wn "
        "(two example sentences using one lemma -> the same sense or not, balanced) and "
        "wn-polarity (an adjective's definition -> its sentiment in a lexicon). Each task "
        "reports a linear probe on the frozen encoder's mean final state beside a bag-of-words "
        "logistic regression and the majority class, as a table on stdout (and --json).")
    add_model_source(p, task=" --task mlm")
    p.add_argument("--suite", choices=("wordnet",), default="wordnet",
                   help="the task suite (default wordnet)")
    p.add_argument("--wordnet", metavar="DIR", type=nonempty, default=None,
                   help="folder holding WordNet's data.noun ... (default $WNSEARCHDIR or "
                        "/usr/share/wordnet)")
    p.add_argument("--lexicon", metavar="FILE", type=nonempty, default=None,
                   help="wn-polarity's sentiment lexicon, lines 'word<TAB>positive|negative' "
                        "(default: Bing's, from the r-cran-tidytext package, read with the "
                        "rdata package; without either the task is left out)")
    p.add_argument("--max-train", type=positive_int, default=20000, metavar="N",
                   help="training examples per task at most, a seeded sample (default 20000)")
    p.add_argument("--fine-tune", type=positive_int, default=None, metavar="STEPS",
                   help="also fine-tune a copy of the encoder with a linear head for STEPS "
                        "AdamW steps of batch 32 per task and report its accuracy")
    p.add_argument("--random-init", action="store_true",
                   help="score the checkpoint's architecture freshly initialised instead (the "
                        "encoder's own baseline)")
    p.add_argument("--seed", type=seed, default=0,
                   help="split, sample and initialisation seed (default 0)")
    add_output_option(p, "--json", "also write the records as JSON (atomically)",
                      metavar="FILE")
    add_at_depth_option(p)
    add_device_option(p)
    add_progress_option(p)
    add_threads_option(p)


def _model(args, device):
    from ...runs.checkpoint import load, model_from_state

    state = load(args.checkpoint, trust=args.trust_checkpoint)
    if state.get("train_config", {}).get("task") != "mlm":
        raise ValueError(f"{args.checkpoint} is not a masked language model (train one with "
                         f"'splitnet train --task mlm')")
    model = model_from_state(state, args.checkpoint)
    if args.random_init:
        import torch

        torch.manual_seed(args.seed)
        model = type(model)(config=model.config)
    from ...mlm.tokens import text_tokens

    return (at_depth_of(model.to(device).eval(), args.at_depth, state.get("train_config")),
            text_tokens(state))


def run(args) -> int:
    import json

    from ..._io import atomic_write_text, check_outputs
    from ...mlm import suite, wordnet
    from ...runs.checkpoint import run_files

    check_outputs([("--json", args.json)],
                  [*run_files(args.checkpoint), ("the lexicon", args.lexicon)])
    wordnet.wordnet_root(args.wordnet)             # before the model loads: one line if absent
    if args.lexicon is not None:
        from ..._io import input_kind

        input_kind(args.lexicon, "--lexicon")
    device = torch_device(args.device)
    set_threads(args.threads)
    model, tokens = _model(args, device)
    show = shows_progress(args.progress)
    from tqdm.auto import tqdm

    def progress(name, total):
        bar = tqdm(total=total, unit="text", desc=name, disable=not show, file=sys.stderr)
        return bar.update

    notes: list[str] = []
    records = suite.evaluate(model, args.wordnet, max_train=args.max_train, seed=args.seed,
                             device=device, progress=progress, fine_tune=args.fine_tune or 0,
                             lexicon=args.lexicon, warn=notes.append, tokens=tokens)
    print(suite.table(records))
    for note in notes:       # after the table: an error stays the one line on stderr
        print(f"splitnet evaluate: note: {note}", file=sys.stderr)
    if args.json:
        atomic_write_text(args.json, json.dumps({"checkpoint": str(args.checkpoint),
                                                 "random_init": args.random_init,
                                                 "records": records}, indent=1))
    return 0


__all__ = ["HELP", "RANK", "configure", "run"]

"""Figures of docs/trajectories.md: token particles in a randomly initialised and a trained model.

    python experiments/trajectories_figs.py                      # uses runs/default if present
    python experiments/trajectories_figs.py --checkpoint runs/default --out docs/figures

Writes (prefix traj_):
  random.png, random_compare.png, random_step_sizes.png
  trained.png, trained_local.png, trained_late.png, trained_3d.png, trained_clustering.png,
  trained_compare.png, trained.gif
and prints the numbers quoted in the docs (mean cosine, effective rank, ODE gap per layer).

The random model has the architecture of ``splitnet train``'s default run (d_model 128, 4 heads,
4 layers, Lie–Trotter, shared weights, h = 1, context 128), seed 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

import splitnet.analyses.trajectories as tr
from splitnet import plots
from splitnet.cli.commands.cmd_trajectories import DEFAULT_TEXT
from splitnet.nets.models import SplitTransformer
from splitnet.runs.checkpoint import load_model

ROOT = Path(__file__).resolve().parents[1]
TEXT = DEFAULT_TEXT
SCHEMES = ("lie-trotter", "strang", "yoshida4")


def report(name: str, t: tr.Trajectories) -> None:
    c = tr.clustering(t)
    g = t.gap(relative=True) if t.path is not None else np.full(len(c.times), np.nan)
    print(f"\n{name}: {t.scheme} ({t.weights}), h = {t.step_size:g}, {t.n_layers} layers, "
          f"{t.n_tokens} tokens")
    print(f"{'layer':>5} {'mean cos':>9} {'eff. rank':>9} {'rel. ODE gap':>13}")
    for k in range(len(c.times)):
        print(f"{k:>5} {c.mean_cosine[k]:9.3f} {c.effective_rank[k]:9.2f} {g[k]:13.3g}")


def local_gap(model, text) -> np.ndarray:
    """One-layer gap per layer (ODE restarted from the network), relative to the ODE's
    displacement over that layer."""
    t = tr.collect(model, text, per_stage=False, continuous=True, points_per_layer=4,
                   restart=True)
    net = t.layer_states()[1:].double()
    ode = t.path_at_layers()[1:].double()
    start = t.layer_states()[:-1].double()
    return ((net - ode).norm(dim=-1).pow(2).mean(-1).sqrt()
            / (ode - start).norm(dim=-1).pow(2).mean(-1).sqrt()).numpy()


def with_step_size(model, h):
    m = SplitTransformer.from_config(model.config.replace(step_size=h))
    m.load_state_dict(model.state_dict())
    return m.eval()


def figures(model, tag: str, out: Path, text: str, gif: bool) -> dict:
    trajs = {s: tr.collect(tr.with_scheme(model, s), text, continuous=True) for s in SCHEMES}
    main = trajs["lie-trotter"] if model.scheme.name == "lie-trotter" else \
        tr.collect(model, text, continuous=True)
    report(tag, main)
    print(f"one-layer relative gap ({tag}):", np.round(local_gap(model, text), 4))
    for s, t in trajs.items():
        print(f"  {s:<12} final rel. ODE gap {t.gap(relative=True)[-1]:.3g}")
    plots.save_trajectory_plot(main, out / f"traj_{tag}.png", text=text)
    plots.plot_scheme_comparison(trajs, out / f"traj_{tag}_compare.png",
                              suptitle=f"{tag}: the same fields run by three schemes, "
                                       f"input {text!r}")
    if gif:
        g = plots.animate(main, out / f"traj_{tag}.gif")
        print(f"gif {g}: {g.stat().st_size / 1e6:.2f} MB")
    return trajs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", default=None,
                   help="trained run directory (default runs/default, skipped if missing; a "
                        "directory given here must hold a checkpoint)")
    p.add_argument("--out", default=str(ROOT / "docs" / "figures"), help="figure directory")
    p.add_argument("--text", default=TEXT, help=f"input (default {TEXT!r})")
    args = p.parse_args(argv)
    ck = Path(args.checkpoint or ROOT / "runs" / "default")
    found = (ck / "checkpoint.pt").is_file() or ck.is_file()
    if args.checkpoint is not None and not found:
        p.error(f"--checkpoint {args.checkpoint}: no checkpoint there (a run directory with "
                f"checkpoint.pt, or the file)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    rand = tr.fresh_model("lie-trotter", d_model=128, n_heads=4, n_layers=4, step_size=1.0,
                          seed=0)
    figures(rand, "random", out, args.text, gif=False)
    rt = tr.collect(rand, args.text, continuous=True)

    # Step size: the same random fields with h = 0.25, 1, 4 (T = 4 h): the network leaves its
    # ODE path as h grows.
    hs = {f"h = {h:g}": tr.collect(with_step_size(rand, h), args.text, continuous=True)
          for h in (0.25, 1.0, 4.0)}
    for k, t in hs.items():
        print(f"random, lie-trotter, {k}: final rel. ODE gap {t.gap(relative=True)[-1]:.3g}")
    plots.plot_scheme_comparison(hs, out / "traj_random_step_sizes.png", joint=False,
                              suptitle="random fields, Lie\u2013Trotter, step size h "
                                       "(each panel its own PCA): dotted = ODE path")

    if found:
        trained = load_model(ck)
        trajs = figures(trained, "trained", out, args.text, gif=True)
        tt = trajs["lie-trotter"] if trained.scheme.name == "lie-trotter" else \
            tr.collect(trained, args.text, continuous=True)
        plots.save_trajectory_plot(tt, out / "traj_trained_3d.png", dim=3, text=args.text)
        # Local view: the ODE restarted from the network's input at every layer; then the
        # same without layer 1, whose jump dominates the picture.
        loc = tr.collect(trained, args.text, continuous=True, restart=True)
        plots.save_trajectory_plot(loc, out / "traj_trained_local.png", text=args.text)
        plots.save_trajectory_plot(loc.since(1), out / "traj_trained_late.png", text=args.text)
        norms = tt.states.norm(dim=-1).mean(dim=-1)
        print("trained: mean token norm per point:", np.round(norms.numpy(), 2))
        plots.plot_clustering({"trained": tt, "random init": rt},
                           out / "traj_trained_clustering.png")
    else:
        print(f"no checkpoint at {ck}: trained figures skipped; clustering of the random model")
        plots.plot_clustering({"random init": rt}, out / "traj_random_clustering.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

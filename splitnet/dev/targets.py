"""Every generated document of the repository, what writes it and how long that takes.

A target is a list of commands run from the repository root (the scripts under ``experiments/``
and the generators of the doc-sync tests), optionally preceded by a preparation that runs only
when a file it makes is missing (e.g. the trained run the trajectory figures need). The
default targets are fast and deterministic: running them on a clean tree leaves it clean.
Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DEFAULT", "ROOT", "TARGETS", "Target"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Target:
    """``name``: what ``regen NAME`` runs; ``writes``: the files; ``takes``: roughly how long on
    2 CPU cores; ``commands``: argv lists after ``python3``; ``prepare``: ``(path, argv)``
    pairs run first, each only when ``path`` (relative to the root) does not exist."""

    name: str
    writes: str
    takes: str
    commands: tuple[tuple[str, ...], ...]
    prepare: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    def command_lines(self) -> list[str]:
        """The commands as one would type them."""
        return ["python3 " + " ".join(c) for c in self.commands]


_SEEDS8 = "0,1,2,3,4,5,6,7"
_PROJECTION_MODELS = ("yoshida4,learned-y4,learned-y4-proj,strang,learned-strang,"
                      "learned-strang-proj")
_LONG_MODELS = "transformer,macaron,sandwich,sdu-gates"
_SEED_SCALE = "docs/data/gpu-h200-2026-11-26/seed_scale"

TARGETS = {t.name: t for t in [
    Target("imports", "docs/architecture.md (the import map)", "seconds",
           (("tests/test_structure.py",),)),
    Target("errors", "docs/errors.md", "~10 s",
           (("tests/test_errors.py",),)),
    Target("zoo", "docs/zoo.md, docs/figures/zoo_efficiency.png (from experiments/cache/zoo/; "
           "--only NAME re-measures NAME, --refresh all)",
           "seconds from the cache; 0.5-2 min per re-measured method; ~1 h with --refresh",
           (("experiments/zoo.py",),)),
    Target("theory", "docs/theory.md (tables), docs/figures/order_*.png, work_precision.png",
           "~3-6 min", (("experiments/order_study.py",),)),
    Target("decoder", "docs/theory.md (the decoder-layer table), docs/figures/decoder_orders.png",
           "~15 s", (("experiments/decoder_study.py",),)),
    Target("partitioned", "docs/theory.md (the partitioned-system table: Euler sub-steps keep "
           "every zoo method's order)", "3-6 min", (("experiments/partitioned_orders.py",),)),
    Target("costs", "docs/networks.md (the cost table)", "seconds (closed forms)",
           (("experiments/cost_table.py", "--write"),)),
    Target("gap", "docs/figures/gap_depth.png, gap_step.png (docs/networks.md)", "~30 s",
           (("experiments/networks_gap.py",),)),
    Target("trajectories", "docs/figures/traj_random*.png, traj_trained*.png, traj_trained.gif "
           "(docs/trajectories.md; trains runs/default first if it is missing)",
           "~1 min (+ ~3 min to train runs/default when it is missing)",
           (("experiments/trajectories_figs.py", "--checkpoint", "runs/default"),),
           (("runs/default/checkpoint.pt", ("-m", "splitnet", "train", "--out", "runs/default",
                                            "--threads", "1")),)),
    Target("hf-trajectories", "docs/figures/traj_gpt2_random.png (docs/trajectories.md; needs "
           "the hf extra)", "~30 s", (("experiments/hf_trajectories.py",),)),
    Target("results", "docs/results.md (the cpu table), docs/figures/compare_cpu.png",
           "~1 h (resumes from runs/compare-cpu)",
           (("experiments/compare_schemes.py", "--seeds", _SEEDS8),)),
    Target("results-long", "docs/results.md (the cpu-long table), "
           "docs/figures/compare_cpu-long.png",
           "several hours (resumes from runs/compare-cpu-long)",
           (("experiments/compare_schemes.py", "--scale", "cpu-long", "--models", _LONG_MODELS,
             "--seeds", "0,1,2"),)),
    Target("peers", "docs/peers.md (the audit table of published RK / predictor-corrector "
           "blocks)", "~30 s", (("experiments/peers_audit.py",),)),
    Target("unsplit", "docs/unsplit.md, docs/figures/unsplit_*.png",
           "~2-3 h on 2 busy cores (33 runs; resumes from runs/unsplit)",
           (("experiments/unsplit_study.py",),)),
    Target("projection", "docs/projection.md, docs/figures/projection_*.png (the projected "
           "arms of the unsplit study, from experiments/cache/projection; "
           "experiments/unsplit_study.py --models ... --runs DIR trains them again: ~30 min)",
           "seconds",
           (("experiments/unsplit_study.py", "--report-only", "--runs",
             "experiments/cache/projection", "--models", _PROJECTION_MODELS,
             "--report", "docs/projection.md", "--figure-prefix", "projection", "--title",
             "Learned coefficients held exactly to a method: the projected arms"),)),
    Target("translation", "docs/translation.md (the tables between its markers), "
           "docs/figures/translation_curves*.png",
           "~7 h on one thread (3 search + 12 study runs of ~27 min; cached in "
           "experiments/cache/translation/v2)",
           (("experiments/translation_study.py", "--search", "--study", "--report"),)),
    Target("scale-out", "docs/scaling.md (ranks under fsdp and fsdp x tp against one process)",
           "~3 min (gloo ranks on the CPU)", (("experiments/scale_out.py",),)),
    Target("seed-scale", "docs/translation.md (the seed-scale tables, from the H200 runs "
           "recorded in docs/data/gpu-h200-2026-11-26/seed_scale)", "seconds",
           (("benchmarks/gpu_seed_scale.py", "--doc", "docs/translation.md", "--table",
             f"{_SEED_SCALE}/steps2800", f"{_SEED_SCALE}/steps944"),)),
    Target("depth", "docs/depth.md, docs/figures/depth_curves.png (from experiments/cache/depth; "
           "without it, trains the 24 runs again: ~20 min on two threads)", "seconds",
           (("experiments/depth_study.py",),)),
    Target("elastic-convergence", "docs/elastic.md (the convergence table between its "
           "markers: one network with weights that are functions of depth at 1..128 steps)",
           "~30 s", (("experiments/elastic_tables.py",),)),
    Target("elastic-start", "docs/elastic.md (the table of bases trained at one depth, from "
           "experiments/cache/elastic_start; without it, trains the 30 runs again: ~30 min on "
           "one thread)", "seconds", (("experiments/elastic_start.py",),)),
    Target("elastic-study", "docs/elastic.md, docs/figures/elastic_study{,_1200}.png (the study "
           "of one network at several depths at 400 and 1200 steps, from "
           "experiments/cache/elastic; 'python3 experiments/elastic_study.py [--steps 1200]' "
           "trains what is missing)", "seconds",
           (("experiments/elastic_study.py", "--report-only"),)),
    Target("elastic-translation", "docs/elastic.md (the translation table of one network at "
           "several depths, from experiments/cache/elastic_translation; without it, trains the "
           "4 runs again: ~1.5 h on two threads)", "seconds",
           (("experiments/elastic_translation.py", "--report-only"),)),
    Target("llama", "docs/llama.md (the table between its markers, from experiments/cache/llama; "
           "without it, trains the 6 runs again: ~10 min on two threads)", "seconds",
           (("experiments/llama_study.py",),)),
    Target("hf-depth", "docs/llama.md (the table of layers dropped and merged on tiny trained "
           "models of each imported family, from experiments/cache/hf_depth; without it, trains "
           "them again: ~1 min a row)", "seconds", (("experiments/hf_depth.py",),)),
    Target("mlm-gradients", "docs/mlm.md (how much of a shared field's gradient its stage calls "
           "cancel, at initialisation)", "~25 s", (("experiments/shared_gradients.py",),)),
    Target("mlm", "docs/mlm.md (the table between its markers), docs/figures/mlm_curves.png",
           "~35 min on two threads (12 runs of 1-5 min; cached in experiments/cache/mlm)",
           (("experiments/mlm_study.py", "--study", "--report"),)),
    Target("solvers", "docs/solvers.md (the tables between its markers: Hénon–Heiles energy, "
           "split-step Schrödinger and reaction–diffusion orders, the cheapest method per "
           "accuracy band; from experiments/cache/solvers)",
           "seconds from the cache; ~3-5 min with --refresh",
           (("experiments/solvers_tables.py",),)),
    Target("refine", "docs/refine.md, docs/figures/refine_*.png",
           "hours (trains 30 runs; resumes from runs/refine)",
           (("experiments/refine_study.py",),)),
]}

DEFAULT = ("imports", "errors", "zoo")

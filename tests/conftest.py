"""``--extras``: the optional extras' tests must run, not skip.

Without an extra (README's bare ``.[dev]`` install) the tests that need it skip cleanly. With
every extra installed, ``python3 -m pytest -q --extras`` turns such a skip into a failure, so a
test that skips for an extra nobody noticed missing (a failed install, a renamed module) cannot
pass as green. A skip counts as "for an extra" when its reason is ``pytest.importorskip``'s
``could not import 'M'`` for a module M of an extra CI installs, or says ``needs the X extra`` /
``needs an optional extra``. Other skips (no CUDA, no gettext catalogues, the Bible modules,
which CI does not install) stay skips.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# The extras CI installs (.ci/run); their modules are read from pyproject.toml.
REQUIRED_EXTRAS = ("hf", "peers", "tensorboard", "translate", "jax")


def pytest_addoption(parser):
    parser.addoption("--extras", action="store_true",
                     help="fail, instead of skipping, a test that needs a missing optional "
                          f"extra ({', '.join(REQUIRED_EXTRAS)}); install them first")


def pytest_configure(config):
    if config.getoption("--extras"):
        try:
            import tomllib  # noqa: F401
        except ImportError as e:
            raise pytest.UsageError("--extras reads pyproject.toml with tomllib: Python "
                                    ">= 3.11") from e


def extra_modules() -> dict[str, str]:
    """Module name -> the extra that provides it, for :data:`REQUIRED_EXTRAS` (a
    distribution's module is its name with '-' as '_': x-transformers -> x_transformers)."""
    import tomllib

    meta = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    deps = meta["project"]["optional-dependencies"]
    return {re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].replace("-", "_"): extra
            for extra in REQUIRED_EXTRAS for req in deps[extra]}


def missing_extra(reason: str, modules: dict[str, str]) -> str | None:
    """The extra a skip's reason says is missing, or None for any other skip."""
    m = re.search(r"could not import '([\w.]+)'", reason)
    if m:
        return modules.get(m.group(1).split(".")[0])
    m = re.search(r"needs the (\w+) extra", reason)
    if m:
        return m.group(1) if m.group(1) in REQUIRED_EXTRAS else None
    return "an optional extra" if "needs an optional extra" in reason else None


def _fail_if_extra(config, report) -> None:
    if not (config.getoption("--extras") and report.skipped):
        return
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    extra = missing_extra(reason, extra_modules())
    if extra is not None:
        report.outcome = "failed"
        report.longrepr = f"--extras: skipped for a missing extra ({extra}): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_if_extra(item.config, outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield                         # a module-level importorskip skips the whole file
    _fail_if_extra(collector.config, outcome.get_result())


def load_script(path: Path):
    """An ``experiments/`` or ``benchmarks/`` script imported as a module under its own name
    (registered in ``sys.modules``, so dataclasses and pickling inside it work)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def exact_norms(monkeypatch):
    """transformers' RMSNorms computed in their input's dtype (float64 here): it casts to
    float32 even from float64, so float64 comparisons of the Llama family would check float32
    rounding rather than the map."""
    pytest.importorskip("transformers")
    import torch
    from transformers.models.llama import modeling_llama
    from transformers.models.mistral import modeling_mistral
    from transformers.models.olmo2 import modeling_olmo2
    from transformers.models.phi3 import modeling_phi3
    from transformers.models.qwen2 import modeling_qwen2
    from transformers.models.qwen3 import modeling_qwen3

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) +
                                              self.variance_epsilon))

    for mod, cls in ((modeling_llama, "LlamaRMSNorm"), (modeling_qwen2, "Qwen2RMSNorm"),
                     (modeling_mistral, "MistralRMSNorm"), (modeling_qwen3, "Qwen3RMSNorm"),
                     (modeling_olmo2, "Olmo2RMSNorm"), (modeling_phi3, "Phi3RMSNorm")):
        monkeypatch.setattr(getattr(mod, cls), "forward", forward)

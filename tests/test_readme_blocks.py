"""Every Python block of README.md runs as printed (issue 49 D17): the blocks in order, in one
namespace, as a reader pasting them into one session would; a block marked
``<!-- not run by tests/test_readme_blocks.py: why -->`` just before it is left out (it needs
files a machine does not have)."""

import re
from pathlib import Path

import torch

README = Path(__file__).resolve().parents[1] / "README.md"
SKIP = "<!-- not run by tests/test_readme_blocks.py"


def blocks() -> list[tuple[int, str]]:
    """``(line, code)`` of each Python block that is run."""
    text = README.read_text()
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if not before.startswith(SKIP):
            out.append((text[:m.start()].count("\n") + 1, m.group(1)))
    return out


def test_every_python_block_of_the_readme_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)             # a block that writes files writes them here
    torch.manual_seed(0)
    namespace: dict = {}
    found = blocks()
    assert len(found) >= 4, found
    for line, code in found:
        try:
            exec(compile(code, f"README.md:{line}", "exec"), namespace)
        except Exception as e:          # name the block that failed
            raise AssertionError(f"README.md block at line {line} fails: {e!r}") from e
    # what the blocks claim, checked where they leave it
    torch.testing.assert_close(namespace["z1"], namespace["x1"], atol=1e-5, rtol=0)
    assert namespace["big"].config.n_layers == 2 * namespace["model"].config.n_layers

"""Bad Hugging Face folders (GPT-2, GPT-NeoX, Llama): every row of docs/errors.md's import
section, raised and checked (the rows are ``HF_CASES`` in tests/hf_folders.py)."""

from __future__ import annotations

import re

import pytest
from hf_folders import HEADER, HF_CASES
from test_errors import DOC, _scratch, hf_section, run_cli

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def root():
    import hf_folders

    return hf_folders.scratch(_scratch())


@pytest.mark.parametrize("case", HF_CASES, ids=[c[0] for c in HF_CASES])
def test_a_bad_hf_folder_is_one_clear_error(case, root):
    _, call, expected, pattern = case
    before = sorted(p.name for p in (root / "hf-folders").iterdir())
    if isinstance(call, list):
        rc, _, err = run_cli(call)
        assert rc == expected, (rc, err)
        assert "Traceback" not in err and err.count("\n") == 1, err
        assert re.search(pattern, err), err
    else:
        with pytest.raises(expected, match=pattern) as info:
            call(root)
        assert type(info.value) is expected
    assert sorted(p.name for p in (root / "hf-folders").iterdir()) == before       # nothing written


def test_the_import_section_of_errors_md_is_current():
    text = DOC.read_text()
    assert HEADER in text
    assert text[text.index(HEADER):] == hf_section(), (
        "docs/errors.md's import section is out of date: run python3 -m splitnet.dev regen errors")

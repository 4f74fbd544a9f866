"""Unknown names: a few close candidates and where the whole list is, never the whole registry
(splitnet/names.py, used by the scheme registry, the sub-flow methods, the command line and
splitnet.dev)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import splitnet as sn
from splitnet.names import close_names, unknown_name


def test_close_candidates_best_first_at_most_three():
    names = ["yoshida4", "yoshida6", "yoshida8", "strang", "lie-trotter"]
    assert close_names("yoshda4", names)[0] == "yoshida4"
    assert len(close_names("yoshida5", names)) == 3
    assert close_names("YOSHIDA4", names) == ["yoshida4"] + close_names("YOSHIDA4", names)[1:]
    assert close_names("xyz", names) == []


def test_the_message_names_candidates_and_the_lister_not_the_registry():
    msg = unknown_name("scheme", "yoshda4", sn.schemes.available("all"))
    assert msg.startswith("unknown scheme 'yoshda4'; did you mean yoshida4")
    assert msg.endswith("(splitnet schemes lists them all)")
    assert "lie-trotter" not in msg and msg.count(",") <= 2
    assert unknown_name("scheme", "xyz", ["strang"]) == (
        "unknown scheme 'xyz'; no scheme has a close name (splitnet schemes lists them all)")
    assert unknown_name("thing", "x", ["y"]) == "unknown thing 'x'; no thing has a close name"
    assert unknown_name("thing", "x", ["y"], listed_by="a command").endswith(
        "(a command lists them all)")


@pytest.mark.parametrize("call,expect", [
    (lambda: sn.schemes.get("yoshda4"), "did you mean yoshida4"),
    (lambda: sn.schemes.get("macarn"), "did you mean macaron"),          # an alias
    (lambda: sn.schemes.resolve("strnag"), "did you mean strang"),
    (lambda: sn.flows.get_method("RK4"), "did you mean rk4"),
])
def test_registries_suggest_close_names(call, expect):
    with pytest.raises(ValueError, match=expect) as info:
        call()
    assert "available:" not in str(info.value) and "suzuki4" not in str(info.value)


def test_the_registry_message_does_not_grow_with_the_registry():
    """A new scheme with an unrelated name leaves the message (and docs/errors.md) as it was."""
    before = unknown_name("scheme", "yoshida5", sn.schemes.available("all"))
    after = unknown_name("scheme", "yoshida5", [*sn.schemes.available("all"), "brand-new42"])
    assert before == after


def test_a_misspelt_command_gets_a_suggestion():
    import contextlib
    import io

    from splitnet.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        rc = main(["trian"])
    err = buf.getvalue()
    assert rc == 2 and err == (
        "splitnet: error: unknown command 'trian'; did you mean train? (splitnet --help lists "
        "them all)\n")


def test_names_module_is_standard_library_only():
    code = "import sys, splitnet.names; print([m for m in ('torch', 'numpy') if m in sys.modules])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       check=True)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr

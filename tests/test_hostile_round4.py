"""Issue 28, the hostile pass after its fixes: what it found, each as a test.

- A source whose every entry was dropped said ``all 1 entries dropped: 1 fuzzy, 1 untranslated
  or empty``: the total left out the entries dropped while the catalogues were read (fuzzy,
  unmatched), so the reasons summed to more than "all". The total now counts every entry read.
- ``schemes --check /dev/zero`` (or a FIFO) said "no file of that name": the file was there.
  ``--check FILE`` now follows the one rule for inputs (``_io.input_kind``/``read_input``).
"""

from __future__ import annotations

import re

import pytest

from splitnet.translate import pairs as P


def test_every_entry_dropped_counts_every_entry(tmp_path):
    import hostile

    src = hostile.pair_sources(tmp_path)["dropped.po"]
    with pytest.raises(ValueError) as info:
        P.load_pairs(src)
    msg = str(info.value)
    assert msg == (f"catalogue {src}: no sentence pairs: all 2 entries dropped: 1 fuzzy, 1 "
                   f"untranslated or empty")
    total, reasons = re.search(r"all (\d+) entries dropped: (.*)$", msg).groups()
    assert int(total) == sum(int(n) for n in re.findall(r"(\d+) [a-z]", reasons))


def test_a_folder_of_dropped_catalogues_sums_its_reasons(tmp_path):
    """Two catalogues of one language, one all fuzzy, one all untranslated: 4 entries, 4
    reasons."""
    import hostile

    d = tmp_path / "cats"
    d.mkdir()
    (d / "apt.po").write_text(hostile.po("de", [("One thing", "Eins"), ("Two things", "Zwei")],
                                         fuzzy=True))
    (d / "sed.po").write_text(hostile.po("de", [("Three", ""), ("Four", "")]))
    with pytest.raises(ValueError, match=r"no sentence pairs: all 4 entries dropped: 2 fuzzy, "
                                         r"2 untranslated or empty$"):
        P.load_pairs(d)


# ---------------------------------------------------------------------------------------------
# schemes --check FILE called a FIFO or /dev/zero "no file of that name"; it now follows the one
# rule for inputs: a stream (/dev/stdin, a pipe) is read once, a device that never ends is
# refused after MAX_FILE bytes, a folder is called a folder.


def _check(capsys, *argv) -> tuple[int, str, str]:
    from splitnet.cli import main

    capsys.readouterr()
    rc = main(["schemes", "--check", *argv])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_check_dev_zero_and_a_folder_are_named(tmp_path, capsys):
    from splitnet.cli.commands.cmd_schemes import MAX_FILE

    rc, out, err = _check(capsys, "/dev/zero", "--order", "1")
    assert (rc, out) == (2, "")
    assert err == (f"splitnet schemes: error: --check /dev/zero: more than the {MAX_FILE:,} bytes "
                   f"read (an endless stream?)\n")
    rc, _, err = _check(capsys, str(tmp_path), "--order", "1")
    assert rc == 2 and err == (f"splitnet schemes: error: --check {tmp_path} is a directory; "
                               f"give a file\n")
    rc, _, err = _check(capsys, str(tmp_path / "nope"), "--order", "1")
    assert rc == 2 and "no file of that name, and not a stage list" in err


def test_check_reads_stages_from_a_stream():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": root}
    r = subprocess.run([sys.executable, "-m", "splitnet", "schemes", "--check", "/dev/stdin",
                        "--order", "2"], input=b"c:0.5\nd:1\nc:0.5\n", capture_output=True,
                       env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert b"declared order 2, measured 2.00" in r.stdout and b"-> OK" in r.stdout, r.stdout


# ---------------------------------------------------------------------------------------------
# a comma list that starts with a negative number was taken for an option ("expected one
# argument"); it is a value, and the value's own check then says what is wrong


@pytest.mark.parametrize("value,words", [("-0.1,0.1", "step_size must be positive, got -0.1"),
                                         ("-1e-3,-2E+1", "step_size must be positive"),
                                         ("-nan,0.1", "expected a finite number, got '-nan'")])
def test_a_list_starting_with_a_negative_number_is_a_value(tmp_path, capsys, value, words):
    from splitnet.cli import main

    png = tmp_path / "o.png"
    capsys.readouterr()
    try:
        rc = main(["order", "--step-sizes", value, "--out", str(png)])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and words in err, err
    assert "expected one argument" not in err and not png.exists()


def test_an_option_name_is_still_an_option():
    from splitnet.cli._args import NEGATIVE_NUMBER

    for text in ("-0.1,0.1", "-1", "-1e308", "-inf", "-.5,-2"):
        assert NEGATIVE_NUMBER.match(text), text
    for text in ("-x", "--beam", "-1,x", "-h", "-0.1,", "-e5"):
        assert not NEGATIVE_NUMBER.match(text), text

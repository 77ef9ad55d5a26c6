"""What every ``aare-lab`` subcommand shares: help for each option, and exit code 2 for a
bad option value or combination, whether argparse or the command finds it."""

import argparse

import numpy as np
import pytest

from aare_lab.cli import build_parser, main


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return actions[0].choices


@pytest.mark.parametrize("name", list(subcommands()))
def test_every_option_has_help(name):
    bare = [action.option_strings or action.dest
            for action in subcommands()[name]._actions if not action.help]
    assert bare == []


@pytest.mark.parametrize("argv, message", [
    (["demo", "--seed", "-1"], "argument --seed: -1 must be an integer >= 0"),
    (["stream-sim", "--n-dark", "-2"], "argument --n-dark: -2 must be an integer >= 0"),
    (["stream-sim", "--wait-subscribers", "-1"], "-1 must be an integer >= 0"),
    (["live", "tcp://127.0.0.1:1", "--n-dark", "10", "--out", "o", "--finder", "gpu"],
     "argument --finder: invalid choice: 'gpu'"),
])
def test_bad_values_argparse_finds_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["stream-sim", "--from", "{frames}", "--n-dark", "3"],
     "--n-dark simulates dark frames: with --from"),
    (["live", "tcp://127.0.0.1:1", "--n-dark", "10", "--out", "o", "--finder", "serial",
      "--threads", "2"], "--threads applies to the frozen finder only"),
])
def test_bad_combinations_a_command_finds_exit_2(argv, message, capsys, tmp_path):
    np.save(tmp_path / "frames.npy", np.zeros((2, 4, 4), np.uint16))
    argv = [a.replace("{frames}", str(tmp_path / "frames.npy")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"aare-lab {argv[0]}: error: ") and message in err

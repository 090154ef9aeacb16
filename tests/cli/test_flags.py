"""Numbers on the command line: a value the command cannot mean is refused by argparse,
naming the flag and what was given, before any work starts."""

from __future__ import annotations

import pytest

from memory_pipeline.cli.main import build_parser

EVAL = ["eval", "--golden", "golden.yaml", "--compare", "old.json"]


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--max-drop", "-0.1"),
        ("--max-drop", "nan"),
        ("--max-drop", "inf"),
        ("--max-drop", "a lot"),
        ("--embed-budget", "-5"),
        ("--embed-budget", "nan"),
    ],
)
def test_eval_refuses_a_negative_or_non_finite_number(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*EVAL, flag, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: expected a number of at least 0, got {value!r}" in err


@pytest.mark.parametrize(("flag", "value"), [("--max-drop", "0"), ("--embed-budget", "2.5")])
def test_eval_takes_zero_and_positive_numbers(flag: str, value: str) -> None:
    args = build_parser().parse_args([*EVAL, flag, value])
    assert getattr(args, flag[2:].replace("-", "_")) == float(value)

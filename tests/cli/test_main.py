"""The entry point: every failure is one line on stderr with the documented exit code; the traceback
of an unexpected error only with --debug."""

from __future__ import annotations

import argparse
import sys
import types

import pytest

from astra_hetero.cli import main as cli


@pytest.fixture
def failing_subcommand(monkeypatch):
    """A subcommand that fails as a bug would: through the registry every subcommand uses."""
    module = types.ModuleType("astra_hetero.cli.explode")

    def register(subparsers: argparse._SubParsersAction) -> None:
        parser = subparsers.add_parser("explode")
        parser.set_defaults(func=lambda args: {}["missing key"])

    module.register = register
    monkeypatch.setitem(sys.modules, "astra_hetero.cli.explode", module)
    monkeypatch.setattr(cli, "SUBCOMMANDS", (*cli.SUBCOMMANDS, "explode"))


def test_an_unexpected_error_is_one_line_and_exit_1(failing_subcommand, capsys):
    assert cli.main(["explode"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: unexpected KeyError") and "--debug" in err


@pytest.mark.parametrize("argv", [["--debug", "explode"], ["explode", "--debug"]])
def test_debug_shows_the_traceback(failing_subcommand, capsys, argv):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().endswith("(a bug)")


def test_usage_errors_exit_2_and_version_exits_0(capsys):
    assert cli.main(["run"]) == 2
    assert cli.main(["--version"]) == 0
    assert cli.main(["generate", "x.yaml", "-o", "out", "--max-nodes", "-5"]) == 2
    assert "positive integer" in capsys.readouterr().err


def test_timeouts_must_be_finite(capsys):
    assert cli.main(["run", "x.yaml", "-o", "out", "--timeout", "nan"]) == 2
    assert "finite" in capsys.readouterr().err


def test_verbose_says_what_the_tool_does_on_stderr_and_quiet_by_default(tmp_path, capsys):
    import yaml

    from tests.test_pipeline import small_spec

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(small_spec()))
    argv = ["run", str(tmp_path / "spec.yaml"), "-o", str(tmp_path / "run"), "--quiet", "--force"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().err == ""
    assert cli.main([*argv, "-v"]) == 0
    err = capsys.readouterr().err
    for said in ("read ", "building the workload and the network", "on the embedded backend", "iteration"):
        assert said in err
    assert "published" not in err  # a detail for -vv
    assert cli.main(["-vv", *argv]) == 0
    assert "published" in capsys.readouterr().err
    import logging

    assert not logging.getLogger("astra_hetero").handlers  # undone after the command

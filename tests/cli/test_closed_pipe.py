"""Output piped into a command that stops reading (`astra-hetero report RUN | head`): a closed pipe is
not an error. Every command that prints exits 0 without a word on stderr; a broken pipe that is not
stdout's is still an error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from astra_hetero.cli import main as cli
from astra_hetero.pipeline import run_spec
from astra_hetero.spec import parse_spec
from tests.test_pipeline import small_spec


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipe")
    (root / "spec.yaml").write_text(yaml.safe_dump(small_spec()))
    run_spec(parse_spec(small_spec()), root / "run")
    return root


def into_closed_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe whose reader has gone (as `| head` leaves it once done)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "astra_hetero.cli.main", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{run}", "--no-plots"],
        ["report", "{run}", "{run}", "--no-plots", "-o", "{root}/compared"],
        ["run", "{run}", "--timeline", "none"],
        ["--help"],
        ["report", "--help"],
    ],
    ids=["report", "compare", "run", "help", "subcommand-help"],
)
def test_a_reader_that_stopped_is_not_an_error(run_dir, argv):
    argv = [a.format(run=run_dir / "run", root=run_dir) for a in argv]
    done = into_closed_pipe(argv)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_broken_pipe_elsewhere_is_still_reported(monkeypatch, capsys):
    def register(subparsers):
        parser = subparsers.add_parser("pipe")
        parser.set_defaults(func=lambda args: (_ for _ in ()).throw(BrokenPipeError(32, "Broken pipe")))

    module = type(sys)("astra_hetero.cli.pipe")
    module.register = register
    monkeypatch.setitem(sys.modules, "astra_hetero.cli.pipe", module)
    monkeypatch.setattr(cli, "SUBCOMMANDS", (*cli.SUBCOMMANDS, "pipe"))
    assert cli.main(["pipe"]) == 1  # stdout (pytest's capture) is fine: the pipe was another one
    assert "BrokenPipeError" in capsys.readouterr().err

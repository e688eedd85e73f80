"""Reading spec, include and sweep files: every malformed file is one SpecError naming the file or the
field, found before anything is expanded, and no error quotes a file that may not be ours to show."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from astra_hetero.errors import SpecError
from astra_hetero.spec import load_spec
from astra_hetero.spec.yamlfile import MAX_DEPTH, read_yaml
from tests.conftest import make_spec_data

SECRET = "s3cr3t-value-never-printed"


def billion_laughs(levels: int = 9) -> str:
    """Each level is ten aliases of the one before: 10**levels values from a few hundred bytes."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def spec_file(tmp_path: Path, name: str = "spec.yaml", **extra) -> Path:
    return write(tmp_path / name, yaml.safe_dump({**make_spec_data(), **extra}))


@pytest.mark.parametrize(
    "content,says",
    [
        (b"name: \xff\xfe bad\n", "not UTF-8"),
        ("a: " + "[" * 50_000 + "]" * 50_000 + "\n", f"nested more than {MAX_DEPTH} levels"),
        ("a: " + "9" * 5000 + "\n", "5000 digits"),
        (billion_laughs(), "expands to more than"),
        ("a: &a [*a]\n", "refers to itself"),
        ("model: [unclosed\n", r"not valid YAML \(line 2"),
    ],
    ids=["non-utf8", "deep", "huge-int", "billion-laughs", "recursive-alias", "syntax"],
)
def test_malformed_files_are_one_clear_error(tmp_path, content, says):
    path = write(tmp_path / "bad.yaml", content)
    with pytest.raises(SpecError, match=says):
        read_yaml(path, "")


def test_duplicate_keys_are_refused_with_their_path(tmp_path):
    path = write(
        tmp_path / "dup.yaml", "cluster:\n  node_groups: []\nnetwork:\n  topology: a\n  topology: b\n"
    )
    with pytest.raises(SpecError) as caught:
        read_yaml(path, "")
    assert caught.value.field == "network.topology" and "duplicate key" in str(caught.value)


def test_shared_aliases_are_fine(tmp_path):
    path = write(tmp_path / "ok.yaml", "a: &x {k: 1}\nb: *x\nc: [*x, *x]\n")
    assert read_yaml(path, "") == {"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 1}]}


@pytest.mark.parametrize("kind", ["missing", "directory", "too-large"])
def test_files_that_cannot_be_specs(tmp_path, kind):
    path = tmp_path / "x.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "too-large":
        with open(path, "wb") as handle:
            handle.truncate(17 * 1024**2)
    with pytest.raises(SpecError, match=str(path.name)):
        load_spec(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_named(tmp_path):
    path = spec_file(tmp_path)
    path.chmod(0)
    with pytest.raises(SpecError, match="cannot be read"):
        load_spec(path)


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
def test_a_file_that_fails_to_read_is_named_even_for_root(tmp_path):
    # /proc/self/mem is a regular file that cannot be read from its start (EIO), whoever reads it.
    spec_file(tmp_path, include="/proc/self/mem")
    with pytest.raises(SpecError, match="cannot be read") as caught:
        load_spec(tmp_path / "spec.yaml")
    assert caught.value.field == "include"


def test_include_cycles_are_reported_not_recursed(tmp_path):
    spec_file(tmp_path, "self.yaml", include="self.yaml")
    with pytest.raises(SpecError, match="include cycle") as caught:
        load_spec(tmp_path / "self.yaml")
    assert caught.value.field == "include"
    write(tmp_path / "a.yaml", "include: b.yaml\n")
    write(tmp_path / "b.yaml", "include: a.yaml\n")
    spec_file(tmp_path, "mutual.yaml", include="a.yaml")
    with pytest.raises(SpecError, match="include cycle"):
        load_spec(tmp_path / "mutual.yaml")


def test_include_through_a_symlink_loop(tmp_path):
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    spec_file(tmp_path, "spec.yaml", include="loop1")
    with pytest.raises(SpecError, match="cannot be resolved") as caught:
        load_spec(tmp_path / "spec.yaml")
    assert caught.value.field == "include"


def test_a_symlink_back_to_the_including_file_is_a_cycle(tmp_path):
    spec_file(tmp_path, "spec.yaml", include="alias.yaml")
    os.symlink(tmp_path / "spec.yaml", tmp_path / "alias.yaml")
    with pytest.raises(SpecError, match="include cycle"):
        load_spec(tmp_path / "spec.yaml")


@pytest.mark.parametrize(
    "value,says", [(None, "got null"), (7, "got int"), ("", "got str"), ([None], "got null")]
)
def test_include_must_name_files(tmp_path, value, says):
    spec_file(tmp_path, include=value)
    with pytest.raises(SpecError, match=says) as caught:
        load_spec(tmp_path / "spec.yaml")
    assert caught.value.field.startswith("include")


@pytest.mark.parametrize(
    "content",
    [
        f"root:x:0:0:{SECRET}:/root:/bin/bash\n",  # a scalar, like /etc/passwd
        f"password: {SECRET}\n",  # a mapping that is not spec sections
        f"cluster: [unclosed {SECRET}\n",  # a syntax error, which PyYAML would print with a snippet
        f"cluster: 1\ncluster: {SECRET}\n",  # a duplicate key
        f"{SECRET}: 1\n{SECRET}: 2\n",
        b"\xff" + SECRET.encode(),
    ],
    ids=["scalar", "foreign-mapping", "syntax", "duplicate", "duplicate-key-name", "binary"],
)
def test_an_include_never_echoes_the_included_file(tmp_path, content):
    write(tmp_path / "private.txt", content)
    spec_file(tmp_path, include="private.txt")
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "spec.yaml")
    assert SECRET not in str(caught.value)
    assert "private.txt" in str(caught.value) and caught.value.field == "include"


@pytest.mark.parametrize(
    "content",
    ["name: x\x00\n", f"{SECRET}=1\x00HOME=/root\x00", "a: 1\n\x07bell\n"],
    ids=["nul", "environ", "bel"],
)
def test_a_control_character_is_an_input_error_naming_the_file(tmp_path, content, capsys):
    from astra_hetero.cli.main import main

    path = write(tmp_path / "bad.yaml", content)
    with pytest.raises(SpecError, match=r"bad\.yaml: not valid YAML \(.*character"):
        read_yaml(path, "")
    assert main(["generate", str(path), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and SECRET not in err and "a bug" not in err


@pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="needs Linux's /proc")
def test_including_proc_self_environ_is_an_input_error_naming_it(tmp_path, capsys, monkeypatch):
    from astra_hetero.cli.main import main

    monkeypatch.setenv("ASTRA_HETERO_TEST_SECRET", SECRET)
    spec = write(tmp_path / "spec.yaml", "include: /proc/self/environ\n")
    assert main(["generate", str(spec), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: include: /proc/") and "environ: not valid YAML" in err  # the real path
    assert SECRET not in err

"""Publishing a directory: the complete new one or the untouched old one, never a mix; leftovers of
killed processes are found and cleaned; nothing is written through a symlink."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from astra_hetero.errors import RunDirError
from astra_hetero.staging import (
    OLD_TAG,
    STAGING_TAG,
    clean_directory,
    clean_leftovers,
    exchange_paths,
    host_tag,
    output_target,
    staged,
    swap_in,
)


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root`: file bytes, or the target of a symlink."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_file():
                found[key] = path.read_bytes()
    return found


def old_directory(tmp_path: Path) -> Path:
    root = tmp_path / "out"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("old a")
    (root / "sub" / "b.txt").write_text("old b")
    return root


def no_leftovers(parent: Path) -> bool:
    return not [p for p in parent.iterdir() if STAGING_TAG in p.name or OLD_TAG in p.name]


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_new_directory_replaces_the_old_one_whole(tmp_path):
    root = old_directory(tmp_path)
    with staged(root) as staging:
        (staging.path / "c.txt").write_text("new")
        assert staging.previous == root and snapshot(root)["a.txt"] == b"old a"
    assert snapshot(root) == {"c.txt": b"new"}
    assert no_leftovers(tmp_path)


@pytest.mark.parametrize("failure", [RuntimeError("boom"), KeyboardInterrupt()], ids=["error", "interrupt"])
def test_a_failure_leaves_the_old_directory_untouched(tmp_path, failure):
    root = old_directory(tmp_path)
    before = snapshot(root)
    with pytest.raises(type(failure)), staged(root) as staging:
        (staging.path / "half.txt").write_text("half")
        raise failure
    assert snapshot(root) == before and no_leftovers(tmp_path)


def test_without_an_atomic_exchange_the_two_renames_still_publish(tmp_path):
    root = old_directory(tmp_path)
    staging = tmp_path / "new"
    staging.mkdir()
    (staging / "c.txt").write_text("new")
    swap_in(staging, root, exchange=lambda a, b: False)
    assert snapshot(root) == {"c.txt": b"new"}
    assert snapshot(staging)["a.txt"] == b"old a"  # the old directory, for the caller to remove


def test_the_exchange_is_atomic_both_ways(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    if not exchange_paths(a, b):
        pytest.skip("this filesystem has no atomic exchange (the fallback is tested above)")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_leftovers_of_dead_processes_are_removed_and_a_moved_aside_directory_restored(tmp_path):
    root = tmp_path / "out"
    pid = dead_pid()
    leftover = tmp_path / f".out{STAGING_TAG}{host_tag()}-{pid}-abc"
    aside = tmp_path / f".out{OLD_TAG}{host_tag()}-{pid}-def"
    leftover.mkdir()
    (leftover / "big.et").write_bytes(b"x" * 1000)
    aside.mkdir()
    (aside / "a.txt").write_text("the old state")  # a swap killed between its two renames
    clean_leftovers(root)
    assert (root / "a.txt").read_text() == "the old state" and no_leftovers(tmp_path)


def test_leftovers_of_live_processes_and_other_hosts_are_left_alone(tmp_path):
    root = tmp_path / "out"
    mine = tmp_path / f".out{STAGING_TAG}{host_tag()}-{os.getpid()}-x"
    other_host = tmp_path / f".out{STAGING_TAG}00000000-{dead_pid()}-x"
    mine.mkdir(), other_host.mkdir()
    clean_leftovers(root)
    assert mine.is_dir() and other_host.is_dir()


def test_publishing_cleans_leftovers_first(tmp_path):
    root = old_directory(tmp_path)
    leftover = tmp_path / f".out{STAGING_TAG}{host_tag()}-{dead_pid()}-abc"
    leftover.mkdir()
    with staged(root) as staging:
        (staging.path / "c.txt").write_text("new")
    assert no_leftovers(tmp_path)


def test_carry_links_files_and_keeps_symlinks_as_symlinks(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    root = old_directory(tmp_path)
    os.symlink(outside, root / "link")
    with staged(root) as staging:
        assert staging.carry("sub") and staging.carry("link") and not staging.carry("missing")
        assert os.stat(staging.path / "sub" / "b.txt").st_ino == os.stat(root / "sub" / "b.txt").st_ino
    assert os.readlink(root / "link") == str(outside) and outside.read_text() == "not ours"
    assert (root / "sub" / "b.txt").read_text() == "old b"


def test_special_files_are_refused_not_read(tmp_path):
    root = old_directory(tmp_path)
    os.mkfifo(root / "pipe")
    with pytest.raises(RunDirError, match="special file"), staged(root) as staging:
        staging.carry("pipe")
    assert (root / "pipe").exists() and no_leftovers(tmp_path)


def test_output_targets(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="not a directory"):
        output_target(tmp_path / "file")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    with pytest.raises(RunDirError, match="leads nowhere"):
        output_target(tmp_path / "dangling")
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    assert output_target(tmp_path / "alias") == tmp_path / "real"
    with staged(tmp_path / "alias") as staging:
        (staging.path / "c.txt").write_text("new")
    assert (tmp_path / "alias").is_symlink() and (tmp_path / "real" / "c.txt").is_file()


def test_a_whole_directory_of_outputs_is_cleaned_in_one_pass(tmp_path):
    pid = dead_pid()
    for name in ("000-a", "001-b"):
        (tmp_path / f".{name}{STAGING_TAG}{host_tag()}-{pid}-x").mkdir()
    (tmp_path / f".002-c{OLD_TAG}{host_tag()}-{pid}-x").mkdir()
    (tmp_path / "003-d").mkdir()
    clean_directory(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["002-c", "003-d"]


def test_a_filesystem_root_is_never_an_output_directory():
    with pytest.raises(RunDirError, match="filesystem root"):
        output_target(Path("/"))

"""Finding a binary: explicit path, then --bin-dir, then $ASTRA_SIM_BIN_DIR, then PATH."""

from __future__ import annotations

import pytest

from astra_hetero.backends.astrasim.locate import locate_binary
from astra_hetero.errors import BackendUnavailable
from tests.astrasim.conftest import write_fake_binary

NAME = "AstraSim_Analytical_Congestion_Aware"


def test_search_order(tmp_path):
    explicit, option, env, on_path = (write_fake_binary(tmp_path / d, NAME) for d in ("a", "b", "c", "d"))
    environ = {"ASTRA_SIM_BIN_DIR": str(env.parent), "PATH": str(on_path.parent)}
    assert locate_binary(NAME, str(explicit), str(option.parent), environ) == explicit
    assert locate_binary(NAME, None, str(option.parent), environ) == option
    assert locate_binary(NAME, None, None, environ) == env
    assert locate_binary(NAME, None, None, {"PATH": str(on_path.parent)}) == on_path


def test_a_directory_without_the_binary_falls_through_to_the_next_place(tmp_path):
    on_path = write_fake_binary(tmp_path / "d", NAME)
    (tmp_path / "empty").mkdir()
    environ = {"ASTRA_SIM_BIN_DIR": str(tmp_path / "empty"), "PATH": str(on_path.parent)}
    assert locate_binary(NAME, None, None, environ) == on_path


def test_not_found_says_where_it_looked(tmp_path):
    environ = {"ASTRA_SIM_BIN_DIR": str(tmp_path), "PATH": ""}
    with pytest.raises(BackendUnavailable) as info:
        locate_binary(NAME, None, None, environ)
    message = str(info.value)
    assert "--bin-dir (not set)" in message
    assert f"$ASTRA_SIM_BIN_DIR: {tmp_path / NAME} (not an executable file)" in message
    assert "PATH (no match)" in message
    assert "--docker IMAGE" in message


def test_an_explicit_binary_that_is_not_executable_is_an_error_not_a_fallback(tmp_path):
    on_path = write_fake_binary(tmp_path / "d", NAME)
    plain = tmp_path / "plain"
    plain.write_text("not a program")
    with pytest.raises(BackendUnavailable, match="not an executable file"):
        locate_binary(NAME, str(plain), None, {"PATH": str(on_path.parent)})

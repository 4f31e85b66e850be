"""`_env.get`: what `os.environ.get` answers, read from the table behind it (no KeyError made
for a variable that is not set, on every query), whatever changed the environment."""

from __future__ import annotations

import os

import pytest

from mlgoodput import _env


def test_get_answers_as_os_environ_get(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "MLGOODPUT_TEST_ENV_GET"
    monkeypatch.delenv(name, raising=False)
    assert _env.get(name) is None
    monkeypatch.setenv(name, "x y é \udcff")  # not UTF-8: kept as os.environ keeps it
    assert _env.get(name) == os.environ.get(name) == "x y é \udcff"
    os.environ[name] = "second"
    assert _env.get(name) == "second"
    del os.environ[name]
    assert _env.get(name) is None
    assert _env.get("HOME") == os.environ.get("HOME")


def test_a_replaced_environment_is_read_through_its_own_get(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "environ", {"MLGOODPUT_TEST_ENV_GET": "from a dict"})
    assert _env.get("MLGOODPUT_TEST_ENV_GET") == "from a dict"
    assert _env.get("HOME") is None


def test_the_dead_limit_follows_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_env.DEAD_AFTER, raising=False)
    assert _env.dead_after_s(0.0) == _env.DEAD_AFTER_S
    monkeypatch.setenv(_env.DEAD_AFTER, "12.5")
    assert _env.dead_after_s(0.0) == 12.5
    monkeypatch.setenv(_env.DEAD_AFTER, "0")
    with pytest.raises(ValueError, match=_env.DEAD_AFTER):
        _env.dead_after_s(0.0)

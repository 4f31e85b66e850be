"""The store registry: schemes to backends, and the questions call sites ask of a URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlgoodput.store import (
    MemoryStore,
    SQLiteStore,
    is_process_local,
    open_store,
    resolve_store_url,
    store_file,
)
from mlgoodput.store._registry import StoreBackend, backend_for, backends, register
from tests.store.dictstore import DictStore


def test_each_scheme_finds_its_backend(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    assert backend_for("sqlite:///a.db").name == "sqlite"  # type: ignore[union-attr]
    assert backend_for("postgres://h/db").name == backend_for("postgresql://h/db").name == "postgres"  # type: ignore[union-attr]
    assert backend_for(str(db)).name == "sqlite"  # type: ignore[union-attr]  # a bare path
    assert backend_for("mysql://x") is None
    assert isinstance(open_store(str(db)), SQLiteStore)
    assert isinstance(open_store("dict://reg-test"), DictStore)
    assert open_store("dict://reg-test") is open_store("dict://reg-test")  # one per URL in a process
    assert open_store("memory://reg-test") is open_store("memory://reg-test")
    assert open_store("memory://reg-a") is not open_store("memory://reg-b")


def test_questions_about_a_url(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    url = resolve_store_url(db)
    assert url == "sqlite://" + db and store_file(url) == db
    assert store_file("memory://x") is None and store_file("postgresql://h/db") is None
    assert is_process_local("memory://x") and is_process_local("dict://x") and is_process_local(MemoryStore().url)
    assert not is_process_local(url) and not is_process_local("postgresql://h/db")
    assert not is_process_local("cloudlogger://log/job#1")  # a store object's URL, no backend: not local


def test_unknown_schemes_name_the_argument_and_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"--store: unknown store URL scheme 'ftp'") as e:
        resolve_store_url("ftp://x/y", "--store")
    for b in backends():
        assert b.example in str(e.value)
    with pytest.raises(ValueError, match="store: an in-memory SQLite store cannot be shared"):
        resolve_store_url("sqlite:///:memory:")


def test_registering_checks_its_input() -> None:
    with pytest.raises(ValueError, match="already registered by the 'memory' backend"):
        register(StoreBackend("other", ("memory",), MemoryStore, "memory://x"))
    with pytest.raises(ValueError, match="another backend already takes bare paths"):
        register(StoreBackend("other", ("other",), MemoryStore, "other://x", takes_paths=True))
    with pytest.raises(ValueError, match="schemes"):
        StoreBackend("bad", ("bad://",), MemoryStore, "bad://x")
    assert "other" not in {b.name for b in backends()}

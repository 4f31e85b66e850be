"""Store identity: a store dropped and made again under the same URL is noticed by writers."""

from __future__ import annotations

import pytest

from mlgoodput._journal import Journal
from mlgoodput.events import Kind
from mlgoodput.store import open_store
from tests.pgserver import fresh_database


@pytest.mark.slow
def test_postgres_schema_dropped_mid_run_later_events_reach_the_new_one(postgres_url: str) -> None:
    import psycopg

    url = fresh_database(postgres_url, "ident")
    st = open_store(url)
    first = st.identity()  # type: ignore[attr-defined]
    assert first and first == st.identity()  # type: ignore[attr-defined]
    j = Journal(url, "ns", "job", 0, interval_s=0.005)
    for i in range(2000):
        j.append(Kind.STEP_START, float(i), i)
    assert j.flush(30)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(
            "DROP TABLE IF EXISTS mlgoodput_chunks, mlgoodput_streams, mlgoodput_writers, mlgoodput_meta, mlgoodput_jobs"
        )
    for i in range(2000, 4000):
        j.append(Kind.STEP_START, float(i), i)
    assert j.flush(30)
    assert j.store_changes >= 1
    j.close()
    st.close()
    st = open_store(url)
    assert st.identity() != first  # type: ignore[attr-defined]
    assert sorted(st.read("ns", "job").columns.steps) == list(range(2000, 4000))
    st.close()

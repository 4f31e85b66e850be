"""A seed-style cloud logger's store URL names that object alone, even after its id is reused."""

from __future__ import annotations

from mlgoodput.store import from_cloud_logger


class _Logger:
    """The two methods a seed-style cloud logger has; nothing is written or read here."""

    def write_cloud_logging_entry(self, entry: object) -> None:
        raise AssertionError("not written in this test")

    def read_cloud_logging_entries(self, start_time: object = None, end_time: object = None) -> list[object]:
        return []


def test_a_new_logger_never_gets_a_dead_loggers_url() -> None:
    urls, ids = [], []
    for _ in range(200):
        logger = _Logger()
        ids.append(id(logger))
        urls.append(from_cloud_logger(logger, "log").url)
        del logger  # freed at once (nothing else holds it): the next one may take its address
    # CPython hands a freed object's address to the next one, so ids repeat here ...
    assert len(set(ids)) < len(ids)
    # ... and each logger's URL (the key that shares a journal) still is its own
    assert len(set(urls)) == len(urls)


def test_one_logger_keeps_one_url() -> None:
    logger = _Logger()
    assert from_cloud_logger(logger, "log").url == from_cloud_logger(logger, "log").url

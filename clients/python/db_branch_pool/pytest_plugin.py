"""pytest plugin: a pristine db-branch pool slot per worker, reset between tests on demand.

    pytest -n 4 --db-branch-pool ci          # or DB_BRANCH_POOL=ci, or ini: db_branch_pool = ci

Fixtures:
  db_branch_slot   (session) the worker's slot; each pytest-xdist worker is its own process,
                   so each has its own slot for the whole run. Released when the worker
                   ends, however it ends.
  db_branch_url    (session) the slot's DATABASE_URL.
  db_branch_env    (session) every variable of the slot (MYSQL_TCP_PORT, MYSQL_PWD, …).
  db_branch_reset  (function) the worker's slot, pristine: reset in place (same URL) before
                   the test if an earlier test that asked for it may have changed it.
"""

import os

import pytest

from . import claim


def pytest_addoption(parser):
    group = parser.getgroup("db-branch")
    group.addoption(
        "--db-branch-pool",
        dest="db_branch_pool",
        default=None,
        help="db-branch pool to claim a slot of per worker (default: $DB_BRANCH_POOL, "
        "or the db_branch_pool ini key)",
    )
    group.addoption(
        "--db-branch-wait",
        dest="db_branch_wait",
        type=float,
        default=None,
        help="seconds to wait for a ready slot (default 120)",
    )
    parser.addini("db_branch_pool", "db-branch pool to claim a slot of per worker")


def _pool(config):
    pool = (
        config.getoption("db_branch_pool")
        or os.environ.get("DB_BRANCH_POOL")
        or config.getini("db_branch_pool")
    )
    if not pool:
        raise pytest.UsageError(
            "db_branch_pool: name the pool with --db-branch-pool NAME, DB_BRANCH_POOL=NAME "
            "or the db_branch_pool ini key"
        )
    return pool


class _Held:
    """The worker's slot and whether a test may have changed it since its last reset."""

    def __init__(self, slot):
        self.slot = slot
        self.dirty = False


@pytest.fixture(scope="session")
def _db_branch_held(pytestconfig):
    wait = pytestconfig.getoption("db_branch_wait")
    slot = claim(_pool(pytestconfig), wait=120.0 if wait is None else wait)
    try:
        yield _Held(slot)
    finally:
        slot.release()


@pytest.fixture(scope="session")
def db_branch_slot(_db_branch_held):
    return _db_branch_held.slot


@pytest.fixture(scope="session")
def db_branch_url(db_branch_slot):
    return db_branch_slot.url


@pytest.fixture(scope="session")
def db_branch_env(db_branch_slot):
    return dict(db_branch_slot.env)


@pytest.fixture
def db_branch_reset(_db_branch_held):
    held = _db_branch_held
    if held.dirty:
        held.slot.reset()
    held.dirty = True
    return held.slot

"""Shared fixtures: a real PostgreSQL server for the session, a fresh database per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.settings import DatabaseSettings
from bot.storage.database import Database, open_database
from tests.support.postgres import TestServer


@pytest.fixture(scope="session")
async def pg_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TestServer]:
    """The embedded PostgreSQL (or TEST_DATABASE_URL's server) with a migrated template."""
    data_dir: Path = tmp_path_factory.mktemp("countersign-pg")
    server = await TestServer.start(data_dir)
    await server.prepare_template()
    yield server
    await server.stop()


@pytest.fixture
async def db_url(pg_server: TestServer) -> AsyncIterator[str]:
    """A fresh, migrated database for one test; dropped afterwards."""
    url = await pg_server.create_database()
    yield url
    await pg_server.drop_database(url)


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    """The bot's pools and savers opened on the test's database."""
    settings = DatabaseSettings(url=db_url, pool_max_size=5)
    async with open_database(settings, run_migrations=False) as db:
        yield db

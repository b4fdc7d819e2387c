"""Discord shard settings and how the supervisor deals shards out to its workers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.settings import DiscordSettings, Settings
from countersign.workers import plan_shards, split_shards


@pytest.fixture(autouse=True)
def no_shard_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in ("DISCORD_TOKEN", "DISCORD_SHARD_COUNT", "DISCORD_SHARD_IDS"):
        monkeypatch.delenv(name, raising=False)


def from_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> DiscordSettings:
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return DiscordSettings()


def test_unset_means_discord_py_decides(monkeypatch):
    """Neither setting: no count, every shard (discord.py asks GET /gateway/bot)."""
    settings = from_env(monkeypatch, DISCORD_SHARD_COUNT="", DISCORD_SHARD_IDS="")
    assert settings.shard_count is None and settings.shard_ids is None


def test_ids_are_parsed_sorted_and_none_means_no_gateway(monkeypatch):
    """`3, 1` is (1, 3) of 4; `none` is the empty tuple (REST only)."""
    assert from_env(monkeypatch, DISCORD_SHARD_COUNT="4", DISCORD_SHARD_IDS=" 3, 1").shard_ids == (1, 3)
    assert from_env(monkeypatch, DISCORD_SHARD_COUNT="4", DISCORD_SHARD_IDS="None").shard_ids == ()
    # `none` needs no count: a Slack replica beside Discord ones only posts (docs/operations.md, Running several replicas)
    alone = from_env(monkeypatch, DISCORD_SHARD_COUNT="", DISCORD_SHARD_IDS="none")
    assert alone.shard_ids == () and alone.shard_count is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"DISCORD_SHARD_IDS": "0"}, "needs DISCORD_SHARD_COUNT"),
        ({"DISCORD_SHARD_COUNT": "2", "DISCORD_SHARD_IDS": "0,2"}, "shard ids must be within 0..1"),
        ({"DISCORD_SHARD_COUNT": "2", "DISCORD_SHARD_IDS": "1,1"}, "a shard id is listed twice"),
        ({"DISCORD_SHARD_COUNT": "2", "DISCORD_SHARD_IDS": "-1"}, "shard ids must be within 0..1"),
        ({"DISCORD_SHARD_COUNT": "0"}, "greater than or equal to 1"),
    ],
)
def test_bad_shard_settings_are_refused(monkeypatch, values, message):
    """Ids without a count, outside 0..count-1, repeated, or a count below 1: a validation error naming the setting."""
    with pytest.raises(ValidationError) as raised:
        from_env(monkeypatch, **values)
    [error] = raised.value.errors()
    assert message in error["msg"]
    assert error["loc"][0] in values


def test_every_shard_is_dealt_to_exactly_one_worker():
    """range(count) over N workers: worker i gets {s : s % N == i}; none is lost or doubled."""
    for count in range(1, 9):
        for workers in range(1, 5):
            plan = split_shards(range(count), workers)
            assert len(plan) == workers
            assert sorted(s for mine in plan for s in mine) == list(range(count))
            for index, mine in enumerate(plan):
                assert mine == tuple(s for s in range(count) if s % workers == index)


def test_a_subset_is_dealt_in_turn_and_extra_workers_get_none():
    """This machine's ids (4..6 of 8) in turn; with more workers than ids the last get nothing."""
    assert split_shards((6, 4, 5), 2) == [(4, 6), (5,)]
    assert split_shards((3,), 3) == [(3,), (), ()]


async def test_the_plan_passes_count_and_ids_to_each_worker():
    """DISCORD_SHARD_COUNT set: no question to Discord; a worker without a shard gets `none`."""
    settings = Settings(discord=DiscordSettings(token="t", shard_count=8, shard_ids=(5, 6)))
    assert await plan_shards(settings, 3) == [
        {"DISCORD_SHARD_COUNT": "8", "DISCORD_SHARD_IDS": "5"},
        {"DISCORD_SHARD_COUNT": "8", "DISCORD_SHARD_IDS": "6"},
        {"DISCORD_SHARD_COUNT": "8", "DISCORD_SHARD_IDS": "none"},
    ]
    assert await plan_shards(Settings(discord=DiscordSettings(token=None)), 2) == [{}, {}]

"""Generated conversations are drawn once and kept on disk; a damaged cache file is never trusted."""

import json

import pytest

from grader.engine import conversations

SEED, COUNT = 4242, 3


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(conversations.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(conversations, "_DRAWN", {})
    return tmp_path


def _fresh():
    conversations._DRAWN.clear()
    return conversations.generated(SEED, COUNT, max_turns=3)


def test_a_second_run_reads_the_same_conversations_from_disk(cache, monkeypatch):
    first = _fresh()
    files = list(cache.glob("conversations-*.json"))
    assert len(files) == 1 and not list(cache.glob("*.tmp"))
    # Drawing again would now be a bug: make it fail loudly.
    monkeypatch.setattr(conversations, "_strategy", lambda *a: pytest.fail("drew again despite the cache"))
    assert _fresh() == first


@pytest.mark.parametrize("damage", ["", "[{\"name\": ", "{}", "[1, 2, 3]", "null",
                                    json.dumps([{"name": "x"}] * COUNT)])
def test_a_damaged_cache_file_is_drawn_again_and_rewritten(cache, damage):
    first = _fresh()
    (path,) = cache.glob("conversations-*.json")
    path.write_text(damage)
    assert _fresh() == first
    assert len(json.loads(path.read_text())) == COUNT


def test_the_key_holds_the_seed_the_count_and_the_strategy(cache):
    _fresh()
    conversations.generated(SEED + 1, COUNT, max_turns=3)
    conversations.generated(SEED, COUNT + 1, max_turns=3)
    conversations.generated(SEED, COUNT, max_turns=2)
    assert len(list(cache.glob("conversations-*.json"))) == 4


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv(conversations.CACHE_ENV, "off")
    monkeypatch.setattr(conversations, "_DRAWN", {})
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert conversations.cache_dir() is None
    conversations.generated(SEED, COUNT, max_turns=3)
    assert not list(tmp_path.rglob("*.json"))

"""The prompt pool cache: the same pool as a fresh build, rebuilt when an input changes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets import build_pool
from loadtest.datasets.pool_cache import pool_key


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADTEST_CACHE", str(tmp_path / "cache"))


def _scenario(tmp_path: Path, sources: list[dict[str, object]], seed: int = 1) -> Scenario:
    return parse_scenario(
        {"name": "pool", "seed": seed, "sources": sources}, str(tmp_path / "s.toml")
    )


def _jsonl(path: Path, prompts: list[str]) -> Path:
    rows = [{"messages": [{"role": "user", "content": p}]} for p in prompts]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _pools(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "pools").glob("*.msgpack"))


def test_a_cached_pool_draws_what_a_fresh_build_draws(tmp_path: Path) -> None:
    sc = _scenario(
        tmp_path,
        [
            {"kind": "humaneval", "category": "code", "weight": 2},
            {"kind": "inline", "category": "chat", "prompts": ["a", "b", "c"], "max_tokens": 7},
        ],
    )
    fresh, counts = build_pool(sc)
    assert len(_pools(tmp_path)) == 1
    cached, cached_counts = build_pool(sc)
    assert cached_counts == counts == {"humaneval:code": 164, "inline:chat": 3}
    assert cached.prompts() == fresh.prompts()
    assert [cached.draw() for _ in range(50)] == [fresh.draw() for _ in range(50)]
    assert {p.max_tokens for p in cached.prompts() if p.category == "chat"} == {7}


def test_an_edited_file_or_another_seed_is_a_new_pool(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "p.jsonl", ["first prompt", "second prompt"])
    sources: list[dict[str, object]] = [{"kind": "jsonl", "category": "c", "path": str(data)}]
    first, _ = build_pool(_scenario(tmp_path, sources))
    assert {p.messages[0]["content"] for p in first.prompts()} == {"first prompt", "second prompt"}
    _jsonl(data, ["an edited prompt"])
    edited, counts = build_pool(_scenario(tmp_path, sources))
    assert counts == {"jsonl:c": 1}
    assert [p.messages[0]["content"] for p in edited.prompts()] == ["an edited prompt"]
    assert pool_key(_scenario(tmp_path, sources, seed=2)) != pool_key(_scenario(tmp_path, sources))


def test_a_damaged_cache_file_is_built_again(tmp_path: Path) -> None:
    sc = _scenario(tmp_path, [{"kind": "inline", "category": "c", "prompts": ["x", "y"]}])
    build_pool(sc)
    (pool,) = _pools(tmp_path)
    pool.write_bytes(b"\x93not msgpack")
    again, counts = build_pool(sc)
    assert counts == {"inline:c": 2}
    assert sorted(p.messages[0]["content"] for p in again.prompts()) == ["x", "y"]


def test_sources_cut_per_endpoint_are_not_cached(tmp_path: Path) -> None:
    sc = _scenario(
        tmp_path,
        [{"kind": "synthetic", "category": "s", "input_tokens": 32, "output_tokens": 8}],
    )
    assert pool_key(sc) is None

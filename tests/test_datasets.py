"""Prompt sources: packaged data sets and a user's files, with clear errors."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.config.scenario import SourceSpec, parse_scenario
from loadtest.datasets import LANGUAGES, PromptPool, build_pool, detect_language, load_source
from loadtest.datasets.sharegpt import load_sharegpt_rows, parse_sharegpt_bytes
from loadtest.errors import DatasetError
from tests.bfcl_data import has_bfcl

needs_bfcl = pytest.mark.skipif(not has_bfcl(), reason="BFCL's data is not here")


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("What is the best way to learn the piano as an adult?", "en"),
        ("¿Cuál es la mejor manera de aprender piano para los adultos?", "es"),
        ("Quelle est la meilleure façon d'apprendre le piano pour les adultes ?", "fr"),
        ("请帮我写一个快速排序算法", "zh"),
        ("東京で一番おいしいラーメン屋はどこですか", "ja"),
        ("피아노를 배우는 가장 좋은 방법은 무엇인가요", "ko"),
        ("Как лучше всего выучить язык программирования?", "ru"),
    ],
)
def test_language_detection(text: str, lang: str) -> None:
    assert detect_language(text) == lang
    assert lang in LANGUAGES


def test_sharegpt_parser_survives_a_truncated_file() -> None:
    conv = [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": f"question {i}"},
                {"from": "gpt", "value": "answer"},
            ],
        }
        for i in range(3)
    ]
    text = orjson.dumps(conv, option=orjson.OPT_INDENT_2)
    rows, skipped = parse_sharegpt_bytes(text[: len(text) - 30], "x.json")
    assert [r["id"] for r in rows] == ["c0", "c1"]
    assert skipped == 1
    whole, none_skipped = parse_sharegpt_bytes(text, "x.json")
    assert len(whole) == 3 and none_skipped == 0


def test_sharegpt_parser_rejects_what_is_not_a_list() -> None:
    with pytest.raises(DatasetError, match=r"x\.json"):
        parse_sharegpt_bytes(b'{"a": 1}', "x.json")


def test_packaged_sharegpt_loads_through_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOADTEST_CACHE", str(tmp_path))
    rows, info = load_sharegpt_rows()
    assert info["cache"] == "built"
    again, info2 = load_sharegpt_rows()
    assert info2["cache"] == "hit"
    assert again == rows
    assert len(rows) > 10_000
    langs = {r["lang"] for r in rows}
    assert {"en", "zh", "ko"} <= langs


def test_sharegpt_language_and_length_filters() -> None:
    spec = SourceSpec(
        kind="sharegpt", category="ml", exclude_languages=("en", "xx"), max_prompt_chars=2000
    )
    prompts = load_source(spec)
    assert prompts
    assert all(p.language not in ("en", "xx") and p.chars <= 2000 for p in prompts)
    with pytest.raises(DatasetError, match="unknown language"):
        load_source(SourceSpec(kind="sharegpt", category="x", languages=("klingon",)))


@needs_bfcl
def test_bfcl_prompts_carry_openai_tools_and_expected_answers() -> None:
    prompts = load_source(
        SourceSpec(kind="bfcl", category="t", subsets=("simple_python",), limit=50)
    )
    assert len(prompts) == 50
    p = prompts[1]
    fn = p.tools[0]["function"]
    assert fn["name"] == "math_factorial"  # dots are not allowed in OpenAI names
    assert dict(p.name_map)["math_factorial"] == "math.factorial"
    assert fn["parameters"]["type"] == "object"  # BFCL says "dict"
    assert p.expected_calls == ({"math.factorial": {"number": [5]}},)


@needs_bfcl
def test_unknown_bfcl_subset_lists_the_known_ones() -> None:
    with pytest.raises(DatasetError, match="simple_python"):
        load_source(SourceSpec(kind="bfcl", category="t", subsets=("nope",)))


def test_humaneval_has_164_problems_with_raw_text() -> None:
    prompts = load_source(SourceSpec(kind="humaneval", category="code"))
    assert len(prompts) == 164
    assert prompts[0].text is not None and prompts[0].text.startswith("\n") is False


def test_jsonl_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n\n{"messages": 3}\n')
    with pytest.raises(DatasetError, match=rf"{path}:3: field 'messages'"):
        load_source(SourceSpec(kind="jsonl", category="c", path=path))
    path.write_text("not json\n")
    with pytest.raises(DatasetError, match=rf"{path}:1: not valid JSON"):
        load_source(SourceSpec(kind="jsonl", category="c", path=path))
    path.write_text('{"messages": [{"role": "wizard", "content": "x"}]}\n')
    with pytest.raises(DatasetError, match=r"messages\[0\] needs a 'role'"):
        load_source(SourceSpec(kind="jsonl", category="c", path=path))
    with pytest.raises(DatasetError, match="cannot read"):
        load_source(SourceSpec(kind="jsonl", category="c", path=tmp_path / "absent.jsonl"))


def test_jsonl_and_sharegpt_file_and_inline(tmp_path: Path) -> None:
    j = tmp_path / "p.jsonl"
    j.write_text(
        '{"id": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9,'
        ' "category": "mine"}\n'
    )
    [p] = load_source(SourceSpec(kind="jsonl", category="c", path=j))
    assert (p.id, p.category, p.max_tokens) == ("a", "mine", 9)
    s = tmp_path / "s.json"
    s.write_bytes(
        orjson.dumps(
            [
                {"id": "x", "conversations": [{"from": "human", "value": "q?"}]},
                {"id": "y", "conversations": [{"from": "gpt", "value": "no"}]},
            ]
        )
    )
    assert [p.id for p in load_source(SourceSpec(kind="sharegpt-file", category="c", path=s))] == [
        "x"
    ]
    inline = load_source(SourceSpec(kind="inline", category="c", prompts=("a", "b")))
    assert [p.messages[0]["content"] for p in inline] == ["a", "b"]


def test_pool_draws_by_weight_and_is_seeded() -> None:
    sc = parse_scenario(
        {
            "seed": 3,
            "sources": [
                {"kind": "inline", "category": "a", "weight": 3, "prompts": ["a"]},
                {"kind": "inline", "category": "b", "weight": 1, "prompts": ["b"], "max_tokens": 7},
            ],
        },
        "t.toml",
    )
    pool, counts = build_pool(sc)
    draws = [pool.draw() for _ in range(4000)]
    share_a = sum(p.category == "a" for p in draws) / len(draws)
    assert share_a == pytest.approx(0.75, abs=0.03)
    assert {p.max_tokens for p in draws if p.category == "b"} == {7}
    assert counts == {"inline:a": 1, "inline:b": 1}
    pool2, _ = build_pool(sc)
    assert [pool2.draw().category for _ in range(50)] == [p.category for p in draws[:50]]
    with pytest.raises(ValueError, match="no prompts"):
        PromptPool([], 0)

"""The data set cache: keyed by the source's content, one copy per data set."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from loadtest.datasets.cache import cache_dir
from loadtest.datasets.sharegpt import sharegpt_rows_of


def _sharegpt(path: Path, prompts: list[str]) -> Path:
    items = [
        {
            "id": f"c{i}",
            "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "ok"}],
        }
        for i, p in enumerate(prompts)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(items, option=orjson.OPT_INDENT_2))
    return path


def _copies(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("sharegpt-v*.json"))


def test_the_cache_folder_is_loadtest_cache_else_xdg_else_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOADTEST_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "own"
    monkeypatch.delenv("LOADTEST_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "loadtest"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "loadtest"


def test_copies_of_one_source_share_a_cache_file_and_a_new_source_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("LOADTEST_CACHE", str(cache))
    cache.mkdir()
    # What the size-and-mtime naming left behind, and another data set's file.
    (cache / "sharegpt-v1-125509632-1796117468.json").write_bytes(b"{}")
    (cache / "sharegpt-conv-v1-125509632-1796117468.json").write_bytes(b"[]")
    prompts = ["Tell me about the sea, please.", "How do magnets work?"]
    one = _sharegpt(tmp_path / "venv-a" / "data.json", prompts)
    # The same data in a second virtual environment: another path, another mtime.
    two = tmp_path / "venv-b" / "data.json"
    two.parent.mkdir()
    shutil.copyfile(one, two)
    os.utime(two, ns=(1_000_000_000, 1_000_000_000))

    rows, info = sharegpt_rows_of(one)
    assert info["cache"] == "built" and [r["prompt"] for r in rows] == prompts
    again, info2 = sharegpt_rows_of(two)
    assert info2["cache"] == "hit" and info2["cache_file"] == info["cache_file"]
    assert again == rows
    (copy,) = _copies(cache)
    assert Path(info["cache_file"]).name == copy  # the old-style file is gone
    assert (cache / "sharegpt-conv-v1-125509632-1796117468.json").exists()

    # A new version of the data set, same size, at the first path: a new cache file,
    # and the one of the old version is removed.
    _sharegpt(one, ["Tell me about the sky, please.", "How do magnets work?"])
    assert one.stat().st_size == two.stat().st_size
    changed, info3 = sharegpt_rows_of(one)
    assert info3["cache"] == "built" and changed[0]["prompt"].endswith("sky, please.")
    assert _copies(cache) == [Path(info3["cache_file"]).name] != [copy]


def test_a_digest_is_computed_once_per_file_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("LOADTEST_CACHE", str(cache))
    source = _sharegpt(tmp_path / "data.json", ["What is a prime number?"])
    _, info = sharegpt_rows_of(source)
    # While the file's size and mtime hold, its remembered digest is trusted (hashing
    # 125 MB at every start would cost ~0.15 s): a planted one shows it is not recomputed.
    digests = orjson.loads((cache / "digests.json").read_bytes())
    (entry,) = digests.values()
    digests[str(source.resolve())] = {**entry, "sha256": "0" * 64}
    (cache / "digests.json").write_bytes(orjson.dumps(digests))
    _, planted = sharegpt_rows_of(source)
    assert planted["cache"] == "built" and "-0000000000000000.json" in planted["cache_file"]
    # Touched: hashed again, and back to the real content's file.
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    _, touched = sharegpt_rows_of(source)
    assert touched["cache_file"] == info["cache_file"]
    assert touched["cache"] == "built"  # the planted name's write removed it
    assert _copies(cache) == [Path(info["cache_file"]).name]

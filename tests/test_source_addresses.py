"""``--source-address`` / ``[load] source_addresses``: connections leave from the given
local addresses, in turn, each worker its own; an address that is not this machine's is
an error naming the flag or key. The simulator's truth says which address each request
came from (``peer``), so the spread is seen from the server's side."""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest

from loadtest.app.options import RunOptions, apply_overrides
from loadtest.app.scale.workers import split_load
from loadtest.config.scenario import LoadSpec
from loadtest.errors import ScenarioError, UsageError
from loadtest.sim import InProcessSim, SimProcess
from tests.conftest import FAST_SIM, make_scenario, run_against

ROOT = Path(__file__).resolve().parent.parent
ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
NOT_HERE = "192.0.2.1"
"""TEST-NET-1 (RFC 5737): documentation only, on no interface of this machine."""


async def _peers(url: str) -> collections.Counter[str]:
    async with aiohttp.ClientSession() as s, s.get(url + "/sim/truth") as resp:
        return collections.Counter(t["peer"] for t in orjson.loads(await resp.read()))


async def test_sessions_are_spread_over_the_addresses_and_keep_theirs(tmp_path: Path) -> None:
    sc = make_scenario(
        {
            "mode": "closed",
            "concurrency": 30,
            "requests": 150,
            "source_addresses": list(ADDRESSES),
        }
    )
    async with InProcessSim(FAST_SIM) as sim:
        _, out = await run_against(sim, sc, tmp_path)
        peers = await _peers(sim.url)
    assert out.metrics.outcomes["ok"] == 150
    # Ten sessions on each address, each doing about five of the requests.
    assert peers.keys() == set(ADDRESSES) and sum(peers.values()) == 150
    assert min(peers.values()) >= 30, peers


async def test_open_loop_requests_take_the_addresses_in_turn(tmp_path: Path) -> None:
    sc = make_scenario(
        {"mode": "constant", "rate": 200, "requests": 30, "source_addresses": list(ADDRESSES)}
    )
    async with InProcessSim(FAST_SIM) as sim:
        _, out = await run_against(sim, sc, tmp_path)
        peers = await _peers(sim.url)
    assert out.metrics.outcomes["ok"] == 30
    assert peers == {a: 10 for a in ADDRESSES}


async def test_without_addresses_the_kernel_picks_loopback(tmp_path: Path) -> None:
    sc = make_scenario({"mode": "closed", "concurrency": 4, "requests": 12})
    async with InProcessSim(FAST_SIM) as sim:
        await run_against(sim, sc, tmp_path)
        peers = await _peers(sim.url)
    assert peers == {"127.0.0.1": 12}


def test_each_worker_takes_its_own_addresses() -> None:
    load = LoadSpec(mode="closed", concurrency=8, source_addresses=(*ADDRESSES, "127.0.0.5"))
    plans = split_load(load, 2, seed=1)
    assert [p.load.source_addresses for p in plans] == [
        ("127.0.0.2", "127.0.0.4"),
        ("127.0.0.3", "127.0.0.5"),
    ]
    # Fewer addresses than workers: one each, in turn (their ports are shared).
    few = split_load(LoadSpec(mode="closed", concurrency=8, source_addresses=ADDRESSES[:2]), 3, 1)
    assert [p.load.source_addresses for p in few] == [
        ("127.0.0.2",),
        ("127.0.0.3",),
        ("127.0.0.2",),
    ]


def test_a_foreign_or_malformed_flag_value_is_an_error_naming_the_flag() -> None:
    sc = make_scenario({"mode": "closed", "concurrency": 1})
    with pytest.raises(UsageError, match=r"--source-address: cannot bind 192\.0\.2\.1"):
        apply_overrides(sc, RunOptions(source_addresses=("127.0.0.2", NOT_HERE)))
    with pytest.raises(UsageError, match=r"--source-address: 'localhost' is not an IP"):
        apply_overrides(sc, RunOptions(source_addresses=("localhost",)))
    with pytest.raises(UsageError, match="--source-address: mixes IPv4 and IPv6"):
        apply_overrides(sc, RunOptions(source_addresses=("127.0.0.2", "::1")))
    ok = apply_overrides(sc, RunOptions(source_addresses=(" 127.0.0.2", "127.0.0.3")))
    assert ok.load.source_addresses == ("127.0.0.2", "127.0.0.3")


def test_a_foreign_or_malformed_key_is_an_error_naming_the_key() -> None:
    with pytest.raises(ScenarioError, match=r"load\.source_addresses: expected IP addresses"):
        make_scenario({"mode": "closed", "source_addresses": ["127.0.0.2", "not-an-ip"]})
    foreign = make_scenario({"mode": "closed", "source_addresses": [NOT_HERE]})
    with pytest.raises(UsageError, match=r"\[load\] source_addresses: cannot bind 192\.0\.2\.1"):
        apply_overrides(foreign, RunOptions())
    # The flag wins over the key, so a foreign key under a good flag is never bound.
    over = apply_overrides(foreign, RunOptions(source_addresses=("127.0.0.2",)))
    assert over.load.source_addresses == ("127.0.0.2",)


def test_two_workers_each_leave_from_their_own_address(tmp_path: Path) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(
        'name = "w"\nmax_tokens = 8\n[[sources]]\nkind = "inline"\nprompts = ["a", "b"]\n'
        "[load]\nconcurrency = 6\nrequests = 60\n"
    )
    with SimProcess(FAST_SIM) as sim:
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadtest",
                "run",
                str(sc),
                "--endpoint",
                sim.url,
                "--no-tui",
                "--workers",
                "2",
                "--source-address",
                "127.0.0.2,127.0.0.3",
                "--out",
                str(tmp_path / "out"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        assert res.returncode == 0, res.stderr[-2000:]
        peers = asyncio.run(_peers(sim.url))
    assert peers == {"127.0.0.2": 30, "127.0.0.3": 30}


def test_a_foreign_address_stops_the_command_before_any_load(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "loadtest", "run", "--check", "--source-address", NOT_HERE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert res.returncode == 2  # a usage error, before anything was started
    assert f"--source-address: cannot bind {NOT_HERE}" in res.stderr


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one() -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, hard)
    code = (
        "import resource\n"
        "from loadtest._compat.open_files import raise_open_files, short_of\n"
        "before = resource.getrlimit(resource.RLIMIT_NOFILE)[0]\n"
        "print(before, raise_open_files(), short_of(10**8) is not None, short_of(8) is None)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard)),
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    before, after, too_many, few = res.stdout.split()
    assert int(before) == low
    expect = hard if hard != resource.RLIM_INFINITY else 1 << 20
    assert int(after) == expect
    # 10**8 connections fit under no limit; 8 under any.
    assert (too_many, few) == ("True", "True")

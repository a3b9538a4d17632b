"""Which endpoint a run talks to, and the fault rig around it.

Three cases: the user's endpoint (``--endpoint``); a managed target the scenario
describes (``[target]``: loadtest starts and restarts it); or the built-in simulator,
which is a plain model, or (``[sim] speculative = true``) a draft process plus a target
process that speculates with it, through the fault proxy when the plan has draft faults.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loadtest.config.feature_specs import FAULTS, SIM, TARGET
from loadtest.config.scenario import Scenario
from loadtest.errors import UsageError
from loadtest.features.faults.plan import FaultPlan, TargetSpec, needs_proxy
from loadtest.features.faults.proxy import FaultProxy
from loadtest.features.faults.registry import fault_table
from loadtest.features.faults.rig import FaultRig
from loadtest.features.faults.target import ManagedTarget
from loadtest.transport.urls import server_root

if TYPE_CHECKING:
    from loadtest.sim import SimProcess
    from loadtest.sim.process import SpecDeployment

__all__ = ["Deployment", "check_deployment", "free_port", "free_ports", "plan_deployment"]


@dataclass
class Deployment:
    """The endpoint URL, the processes started for it, and the rig to hand the runner."""

    endpoint: str
    rig: FaultRig
    sim: SimProcess | None = None
    spec: SpecDeployment | None = None
    notes: tuple[str, ...] = ()

    def wait_ready(self) -> None:
        """Block until the simulator processes started here listen (they start spawned).

        The managed target, if any, is the rig's to start and wait for, in the event loop.
        """
        if self.sim is not None:
            self.sim.wait_ready()
        if self.spec is not None:
            self.spec.draft.wait_ready()

    def stop(self) -> None:
        """Stop the processes started outside the event loop (the draft, a plain sim)."""
        if self.sim is not None:
            self.sim.stop()
        if self.spec is not None:
            self.spec.stop()


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now (the OS picks it; another process may take it later)."""
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free ports: all bound at once, so that none is handed out twice."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]


def _split(hostport: str) -> tuple[str, int]:
    host, _, port = hostport.rpartition(":")
    return host, int(port)


def check_deployment(scenario: Scenario, endpoint: str | None) -> list[str]:
    """``UsageError`` where no deployment can carry out the plan; warnings for events
    that will be skipped. Starts nothing: ``plan_deployment`` and ``--check`` both ask it.
    """
    plan = FAULTS.of(scenario)
    if endpoint is not None and any(fault_table(e.kind).runs.needs_target for e in plan.events):
        raise UsageError(
            "the scenario restarts its target, but --endpoint names one loadtest does "
            "not manage; drop --endpoint to use the scenario's [target] or the simulator"
        )
    own_deployment = endpoint is not None or TARGET.get(scenario) is not None
    if not own_deployment and not SIM.of(scenario).speculative and needs_proxy(plan):
        raise UsageError(
            "the scenario has draft faults but no draft: set [sim] speculative = true, "
            "or point [faults].proxy_upstream at your draft server"
        )
    if not own_deployment or plan.proxy_upstream is not None:
        return []
    # The rig skips these windows (ProxyToxic.inject): said before the run, not only after.
    return [
        f"fault {e.label!r} ({e.kind}) will be skipped: no fault proxy in front of a "
        "draft (set [faults].proxy_upstream to your draft's host:port, or run without "
        "--endpoint)"
        for e in plan.events
        if fault_table(e.kind).runs.needs_proxy
    ]


def serves_simulator(scenario: Scenario, endpoint: str | None) -> bool:
    """Whether the built-in simulator serves a run: no endpoint given, no ``[target]``."""
    return endpoint is None and TARGET.get(scenario) is None


def plan_deployment(scenario: Scenario, endpoint: str | None, run_dir: Path) -> Deployment:
    """Spawn what must run outside the event loop and build the rig for the rest.

    Nothing is waited for here: the simulator processes start while the caller loads
    its prompts and the rig starts the target; ``Deployment.wait_ready`` joins them.
    """
    check_deployment(scenario, endpoint)
    plan = FAULTS.of(scenario)
    notes: list[str] = []
    if endpoint is not None:
        return Deployment(endpoint, _rig(plan, scenario.seed, endpoint, None, None, {}), notes=())
    t = TARGET.get(scenario)
    if t is not None:
        target = ManagedTarget(t, run_dir / "target.log")
        rig = _rig(plan, scenario.seed, t.endpoint, target, None, {})
        return Deployment(t.endpoint, rig, notes=(f"managed target: {' '.join(t.command)}",))
    # The simulator is imported only when it is the deployment (a noticeable part of the
    # start-up, most of it aiohttp's server side): a run against an endpoint does not wait.
    from loadtest.sim import SimConfig, SimProcess
    from loadtest.sim.process import SpecDeployment, sim_command
    from loadtest.sim.profile import with_profile

    sim_spec = SIM.of(scenario)
    settings = sim_spec.settings
    config = with_profile(dataclasses.replace(SimConfig(seed=scenario.seed), **settings), settings)
    if not sim_spec.speculative and not plan.events:
        sim = SimProcess(config, port=free_port())
        sim.spawn()
        url = f"http://{sim.host}:{sim.port}"
        notes.append(f"no --endpoint given: using the built-in simulator at {url}")
        rig = _rig(plan, scenario.seed, url, None, None, {})
        return Deployment(url, rig, sim=sim, notes=tuple(notes))
    # The draft, the proxy and the target, each on its own port, chosen together.
    draft_port, proxy_port, port = free_ports(3)
    spec = SpecDeployment(config) if sim_spec.speculative else None
    draft_url = ""
    proxy = None
    if spec is not None:
        draft_url = spec.spawn_draft(draft_port)
        uses = draft_url
        if needs_proxy(plan):
            host, dport = _split(draft_url.removeprefix("http://"))
            proxy = FaultProxy(host, dport, listen_port=proxy_port, seed=scenario.seed)
            uses = proxy.url
        config = spec.target_config(uses)
        notes.append(f"draft server at {draft_url}" + (f", reached via {uses}" if proxy else ""))
    url = f"http://127.0.0.1:{port}"
    target = ManagedTarget(
        TargetSpec(
            command=tuple(sim_command(config, port=port)),
            ready_url=f"{url}/health",
            endpoint=url,
            ready_timeout_s=30.0 + config.load_s,
        ),
        run_dir / "target.log",
    )
    kind = "speculative target" if spec else "simulator"
    notes.append(f"no --endpoint given: using the built-in {kind} at {url}")
    rig = _rig(plan, scenario.seed, url, target, proxy, {"draft": draft_url})
    return Deployment(url, rig, spec=spec, notes=tuple(notes))


def _rig(
    plan: FaultPlan,
    seed: int,
    endpoint: str,
    target: ManagedTarget | None,
    proxy: FaultProxy | None,
    placeholders: dict[str, str],
) -> FaultRig:
    if proxy is None and plan.proxy_upstream is not None:
        host, port = _split(plan.proxy_upstream)
        lhost, lport = _split(plan.proxy_listen)
        proxy = FaultProxy(host, port, lhost, lport, seed=seed)
    metrics_url = plan.metrics_url or server_root(endpoint) + "/metrics"
    return FaultRig(
        plan,
        target=target,
        proxy=proxy,
        metrics_url=metrics_url,
        placeholders={"target": endpoint, **placeholders},
        seed=seed,
    )

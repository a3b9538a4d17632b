"""``loadtest plugins``: every extension point's plugins, where each comes from, and
whether it loads, as a run would load it."""

from __future__ import annotations

import argparse

from loadtest.cli.parser import Parser

__all__ = [
    "add_grafana_command",
    "add_plugins_command",
    "run_grafana_command",
    "run_plugins_command",
]


def add_plugins_command(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """The sub-command's parser."""
    sub.add_parser(
        "plugins",
        parents=[out],
        help="list the installed plugins of each kind, where each comes from and whether "
        "it loads (LOADTEST_DISABLE_PLUGINS turns one off); exit 1 when one fails",
    )


def add_grafana_command(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """``loadtest grafana``: the live outputs' dashboard, on stdout."""
    sub.add_parser(
        "grafana",
        parents=[out],
        help="print the Grafana dashboard of the live figures (--prometheus) as JSON: "
        "loadtest grafana > dashboard.json, then import it in Grafana",
    )


def run_grafana_command(args: argparse.Namespace) -> int:
    """Print the dashboard's JSON model."""
    import json

    from loadtest.live.grafana import dashboard

    print(json.dumps(dashboard(), indent=2))
    return 0


def run_plugins_command(args: argparse.Namespace) -> int:
    """Print each group's plugins; 1 when one of them cannot be loaded."""
    # Importing the modules that own the extension points makes their registries.
    import loadtest.app.ab.side_types
    import loadtest.config.arrivals
    import loadtest.config.dimensions
    import loadtest.config.sources
    import loadtest.config.stop_rules
    import loadtest.config.tables
    import loadtest.features.faults.registry
    import loadtest.features.workload_kinds
    import loadtest.live.outputs
    import loadtest.model.blocks
    import loadtest.report.outputs  # noqa: F401
    from loadtest.registry import DISABLE_ENV, registries

    failed = 0
    for group, registry in sorted(registries().items()):
        infos = list(registry.info())
        print(f"{group}: {len(infos)} ({registry.what} plugins)")
        width = max((len(i.name) for i in infos), default=0)
        for i in infos:
            said = i.state if not i.why else f"{i.state}: {i.why}"
            print(f"  {i.name:<{width}}  {i.source:<28} {i.value}  {said}")
            failed += i.state == "failed"
    print(f"\n{DISABLE_ENV}=NAME or GROUP:NAME (comma-separated) turns plugins off")
    return 1 if failed else 0

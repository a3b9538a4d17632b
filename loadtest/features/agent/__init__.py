"""Agent sessions: multi-step tool tasks, time to a valid call and to a done task, traces.

Modules: ``tasks`` (BFCL multi-turn and recorded sessions), ``spec`` (the scenario's
``[agent]`` and ``[[tasks]]``), ``session`` (one task, pure logic), ``tools`` (tool
latency or real calls), ``metrics``, ``trace`` (Chrome trace JSON) and ``driver`` (the
glue to the runner). Nothing is imported here: the scenario module imports ``spec``,
and the rest needs the scenario module.
"""

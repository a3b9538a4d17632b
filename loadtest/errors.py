"""The one exception tree of loadtest.

::

    LoadtestError                 anything loadtest raises on purpose
    ├── UsageError                a command-line flag or combination is wrong
    ├── ScenarioError             a scenario file is unreadable or invalid (names file and key)
    ├── DatasetError              a prompt source cannot be loaded (names file and line)
    │   └── MissingPackageError   a data package is not installed (names the pip command)
    ├── MissingExtraError         an optional extra (e.g. loadtest[llama]) is not installed
    ├── EndpointError             the endpoint (or the built-in simulator) cannot be reached
    ├── ProtocolError             a server sent bytes that break the SSE or OpenAI protocol
    └── ResultFileError           a summary.json is unreadable or invalid (names file and field)

Failures of single requests during a load run are *not* raised to the user: the client
maps them to an outcome class in the request's record, so every request is accounted for.
"""

from __future__ import annotations


class LoadtestError(Exception):
    """Base class of every error loadtest raises on purpose."""


class UsageError(LoadtestError):
    """A command-line flag, or a combination of flags, is wrong."""


class ScenarioError(LoadtestError):
    """A scenario file is unreadable or invalid.

    The message names the file, the key (dotted path) and what was expected.
    """

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        self.problem = problem
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {problem}")


class DatasetError(LoadtestError):
    """A prompt source cannot be loaded; the message names the file and line."""


class MissingPackageError(DatasetError):
    """A prompt source needs a data package that is not installed."""

    def __init__(self, source: str, package: str, install: str) -> None:
        self.source = source
        self.package = package
        super().__init__(
            f"prompt source {source!r} needs the package {package!r}, which is not "
            f"installed; install it with: {install}"
        )


class MissingExtraError(LoadtestError):
    """A feature needs an optional extra that is not installed; names the pip command."""

    def __init__(self, what: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs the optional extra {extra!r}, which is not installed; install it "
            f"with: pip install -e '.[{extra}]' (from a checkout) or pip install "
            f"'loadtest[{extra}]'"
        )


class EndpointError(LoadtestError):
    """The endpoint, or the built-in simulator, cannot be reached or started."""


class ProtocolError(LoadtestError):
    """A server sent bytes that break the SSE or OpenAI streaming protocol."""


class ResultFileError(LoadtestError):
    """A result file (``summary.json``) is unreadable or breaks its schema.

    The message names the file and the field (``$.requests.sent``).
    """

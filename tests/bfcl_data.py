"""The BFCL data guard shared by the tests that read BFCL's files."""

from __future__ import annotations

import os
from typing import Any

import pytest

from loadtest.datasets.bfcl import bfcl_data_dir
from loadtest.errors import MissingPackageError

__all__ = ["bfcl_or_skip", "has_bfcl"]


def has_bfcl() -> bool:
    """Whether BFCL's data can be read (installed, or a downloaded wheel); with
    ``LOADTEST_REQUIRE_BFCL=1`` (set by the test command) its absence is a failure."""
    try:
        bfcl_data_dir()
    except MissingPackageError:
        if os.environ.get("LOADTEST_REQUIRE_BFCL") == "1":
            raise
        return False
    return True


def bfcl_or_skip() -> Any:
    """BFCL's data folder, or skip the calling module when it is not there."""
    if not has_bfcl():
        pytest.skip("BFCL's data is not here (README: pip download)", allow_module_level=True)
    return bfcl_data_dir()

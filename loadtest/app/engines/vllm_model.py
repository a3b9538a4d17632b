"""The model folder vLLM serves, made once from the shipped GGUF (the ``vllm`` extra).

vLLM 0.32 no longer reads GGUF, so the Gemma 3 270M GGUF of ``loadtest[llama]``'s model
package is converted with transformers (``gguf`` + ``accelerate``): dequantized to
bfloat16, rebuilt from its config and written with ``save_pretrained`` (a minute or two,
gigabytes at its peak: docs/vllm.md), in a child process so that the server starts small.
Two things the GGUF's tokenizer lacks are put right, or the model answers garbage or
cannot chat:

- it does not add ``<bos>``: ``add_bos_token`` is set, and checked on a sample;
- it has no chat template: Gemma 3's turn format is written (``CHAT_TEMPLATE``), tools
  listed in the first turn and calls written the ``pythonic`` way vLLM's parser reads;
  generation stops on ``<eos>`` (1) and ``<end_of_turn>`` (106).

The folder is named by the GGUF's sha256 (as the draft builder names its file) and
written beside it under a temporary name, then renamed: a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from loadtest.app.engines.draft_model import file_sha256
from loadtest.errors import EndpointError, MissingExtraError

__all__ = ["CHAT_TEMPLATE", "STOP_TOKEN_IDS", "convert", "ensure_vllm_model", "model_folder"]

STOP_TOKEN_IDS = (1, 106)
"""``<eos>`` and ``<end_of_turn>``: an instruction-tuned Gemma 3 ends a turn with 106."""
_DONE = "loadtest-converted"
"""Written last into a finished folder: the GGUF's sha256 it was made from."""

CHAT_TEMPLATE = """{{- bos_token -}}
{%- set ns = namespace(first=true) -%}
{%- if tools -%}
{{- '<start_of_turn>user\\nYou can call these functions. To call one, answer only with a \
Python list of calls, e.g. [get_weather(city="Paris")].\\n' -}}
{%- for t in tools -%}{{- (t.function | tojson) + '\\n' -}}{%- endfor -%}
{{- '<end_of_turn>\\n' -}}
{%- endif -%}
{%- for m in messages -%}
{%- set role = 'model' if m.role == 'assistant' else 'user' -%}
{{- '<start_of_turn>' + role + '\\n' -}}
{%- if m.role == 'system' -%}{{- 'System: ' -}}{%- endif -%}
{%- if m.role == 'tool' -%}{{- 'Function result: ' -}}{%- endif -%}
{%- if m.content is string -%}{{- m.content | trim -}}
{%- elif m.content is iterable -%}
{%- for part in m.content -%}{%- if part.type == 'text' -%}{{- part.text | trim -}}\
{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- if m.tool_calls -%}
{{- '[' -}}
{%- for c in m.tool_calls -%}
{%- set args = c.function.arguments -%}
{{- c.function.name + '(' -}}
{%- if args is mapping -%}
{%- for k, v in args.items() -%}{{- k + '=' + (v | tojson) -}}\
{%- if not loop.last -%}{{- ', ' -}}{%- endif -%}{%- endfor -%}
{%- elif args -%}{{- args -}}
{%- endif -%}
{{- ')' -}}{%- if not loop.last -%}{{- ', ' -}}{%- endif -%}
{%- endfor -%}
{{- ']' -}}
{%- endif -%}
{{- '<end_of_turn>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}
"""
"""Gemma 3's turns (``<start_of_turn>user|model`` ... ``<end_of_turn>``). Unlike Google's
template it does not raise on roles out of order (loadtest's agent replays send system,
tool and consecutive turns); system and tool messages become user turns, labelled."""


def model_folder(gguf: Path) -> Path:
    """Where the converted folder of ``gguf`` lives (beside it, by its sha256)."""
    digest = file_sha256(gguf, gguf.parent / "hashes")
    return gguf.parent / f"{gguf.stem}.{digest[:16]}.vllm"


def ensure_vllm_model(gguf: Path, *, timeout_s: float = 900.0) -> Path:
    """The converted folder of ``gguf``, made in a child process on first use."""
    out = model_folder(gguf)
    digest = file_sha256(gguf, gguf.parent / "hashes")
    if (out / _DONE).is_file() and (out / _DONE).read_text().strip() == digest:
        return out
    tmp = out.with_name(f"{out.name}.{os.getpid()}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, "-m", "loadtest.app.engines.vllm_model", str(gguf), str(tmp)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise EndpointError(f"converting {gguf.name} for vLLM took over {timeout_s} s") from exc
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        if "MissingExtraError" in done.stderr:
            raise MissingExtraError("converting the model for vLLM (transformers)", "vllm")
        raise EndpointError(f"converting {gguf.name} for vLLM failed:\n{tail}")
    (tmp / _DONE).write_text(digest + "\n")
    shutil.rmtree(out, ignore_errors=True)  # a stale or half-made one
    os.replace(tmp, out)
    return out


def convert(gguf: Path, out: Path) -> None:
    """Write the bf16 model folder of ``gguf`` into ``out`` (see the module's note)."""
    from loadtest._compat.vllm_cpu import hide_media_packages

    hide_media_packages()  # before transformers looks for them
    try:
        import torch
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoTokenizer,
            GenerationConfig,
            GgufConfig,
        )
    except ImportError as exc:
        raise MissingExtraError("converting the model for vLLM (transformers)", "vllm") from exc
    folder, name = str(gguf.parent), gguf.name
    loaded = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.bfloat16,
    )
    # Rebuilt from its config: what from_pretrained left of the GGUF reading (its
    # quantization settings) must not reach config.json, which vLLM would then obey.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    config.torch_dtype = torch.bfloat16
    for attr in ("quantization_config",):
        if hasattr(config, attr):
            delattr(config, attr)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.load_state_dict(loaded.state_dict())
    del loaded
    model.generation_config = GenerationConfig(
        bos_token_id=2, eos_token_id=list(STOP_TOKEN_IDS), pad_token_id=0
    )
    model.save_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tokenizer.add_bos_token = True  # _check_tokenizer proves it took
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    _check_tokenizer(out)


def _check_tokenizer(out: Path) -> None:
    """The saved tokenizer must add ``<bos>`` (id 2): without it the model answers noise."""
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(out)("Hello").input_ids
    if not ids or ids[0] != 2:
        config = json.loads((out / "tokenizer_config.json").read_text())
        raise EndpointError(f"the converted tokenizer does not add <bos>: {ids} ({config})")


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]))

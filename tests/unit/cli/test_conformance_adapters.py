"""Adapter requests in the conformance suite: the reference bare vLLM gets the replica's adapters
as static LoRA modules with its slots and rank (vLLM's own parser reads the flags), and the
cases name each adapter as `model`, plus an unknown adapter name."""

from __future__ import annotations

from pathlib import Path

import yaml

from slomesh.cli.conformance import vllm_replica_args
from slomesh.conformance.adapters import adapter_cases, lora_cli_args, replica_adapters

CONFIG = Path(__file__).resolve().parents[3] / "deploy" / "ray" / "local-many-adapters.yaml"


def test_reference_serves_the_replicas_adapters_as_static_modules() -> None:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    replica = vllm_replica_args(yaml.safe_load(CONFIG.read_text()))
    flags = lora_cli_args(replica)
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "m", *flags])
    assert parsed.enable_lora and (parsed.max_loras, parsed.max_lora_rank) == (2, 16)
    modules = {m.name: m.path for m in parsed.lora_modules}
    assert list(modules) == [a.name for a in replica_adapters(replica)]
    assert all(Path(p).is_absolute() for p in modules.values())  # ~ expanded, as replicas load
    assert lora_cli_args({"vllm": {}}) == []


def test_cases_name_each_adapter_as_model() -> None:
    cases = adapter_cases(["a", "b"])
    assert {c.body["model"] for c in cases if isinstance(c.body, dict)} == {"a", "b", "a-missing"}
    assert [c.name for c in cases if c.stream] == ["adapter/a/chat/stream", "adapter/b/chat/stream"]
    assert adapter_cases([]) == []

"""`slomesh plan` (slomesh/cli/plan.py; HELR, UELLM Algorithm 2): models,
device maps, the written Serve config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from services.deployer.core import ModelDemand
from slomesh.cli.errors import UsageError
from slomesh.cli.main import main
from slomesh.cli.plan import parse_models

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "ray" / "inventory" / "example.yaml"


def test_parse_models() -> None:
    assert parse_models("llama-2-70b:2, mistral-7b") == [
        ModelDemand("llama-2-70b", 2),
        ModelDemand("mistral-7b", 1),
    ]
    with pytest.raises(UsageError, match="model:replicas"):
        parse_models("llama-2-70b:two")


def test_plan_prints_maps_and_writes_a_serve_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "serve.yaml"
    argv = ["plan", "--inventory", str(EXAMPLE), "--models", "llama-2-70b:1,llama-3.1-8b:1"]
    assert main([*argv, "--planner", "helr-he", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "replica-0 llama-2-70b: pp=2 node-a/0[0:41) -> node-a/1[41:80)" in printed
    config = yaml.safe_load(out.read_text())
    (r0,) = [a for a in config["applications"] if a["name"] == "replica-0"]
    assert r0["runtime_env"]["env_vars"]["VLLM_PP_LAYER_PARTITION"] == "41,39"
    assert r0["args"]["vllm"]["model"] == "llama-2-70b"  # finalized
    schema = pytest.importorskip("ray.serve.schema")
    schema.ServeDeploySchema.model_validate(config)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--planner", "helr"], "valid: first-fit, helr-he, helr-lr"),
        (["--planner", "first-fit"], "first-fit needs one GPU type per node"),
    ],
)
def test_plan_errors_exit_2(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--inventory", str(EXAMPLE), "--models", "llama-3.1-8b:1", *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err

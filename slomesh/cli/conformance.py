"""`slomesh conformance`: the differential suite against a deployment.

Sends the corpus (slomesh/conformance/corpus.py) to a reference vLLM server and to the
deployment under test (`--against`, its root URL), one request at a time, and prints the table
of cases; exits 1 when any case differs. Without `--reference` it starts bare vLLM itself with
the engine arguments of the first vLLM replica of `--config` (deploy/ray/local.yaml by
default): the same model, dtype, context and cache as the deployment's replicas.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "conformance",
        help="send the same OpenAI requests to bare vLLM and to a deployment; compare answers",
    )
    p.add_argument("--against", required=True, help="root URL of the deployment under test")
    p.add_argument("--reference", help="root URL of a reference vLLM server (default: start one)")
    p.add_argument(
        "--config",
        type=Path,
        help="Serve config whose vLLM replica args the "
        "reference runs with (default deploy/ray/local.yaml)",
    )
    p.add_argument("--model", help="served model name (default: the config's first replica's)")
    p.add_argument("--api-key", help="bearer key for the deployment under test")
    p.add_argument("--port", type=int, default=8310, help="port of a started reference")
    p.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    p.add_argument("--only", help="run only cases whose name contains this text")
    p.set_defaults(func=run_conformance)


def vllm_replica_args(config: dict[str, Any]) -> dict[str, Any]:
    """The args of the first vLLM replica application of a Serve config."""
    for app in config["applications"]:
        args = app.get("args") or {}
        if app["name"].startswith("replica-") and args.get("engine") == "vllm":
            return dict(args)
    raise ValueError("the config has no vLLM replica (engine: vllm)")


@contextlib.contextmanager
def reference_server(
    replica: dict[str, Any], port: int, ready_timeout_s: float = 600.0
) -> Iterator[str]:
    """Bare vLLM with `replica`'s engine arguments (and its serving options) on `port`; its
    start-up may take `ready_timeout_s` (vLLM's CPU start-up beside a running mesh takes
    minutes on a loaded 2-core host)."""
    from dataclasses import replace

    from slomesh.bench.compare.load import answers
    from slomesh.bench.compare.systems import bare_vllm_spec, engine_kwargs, launch, stop

    kwargs = engine_kwargs(replica["vllm"])
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
    spec = bare_vllm_spec(kwargs, replica["model"], port, env)
    serving = replica.get("serving") or {}
    if serving:
        from services.replica.vllm.openai_app import ServingOptions

        spec = replace(spec, command=[*spec.command, *ServingOptions(**serving).cli_args()])
    from slomesh.conformance.adapters import lora_cli_args

    spec = replace(
        spec,
        command=[*spec.command, *lora_cli_args(replica)],
        ready_timeout_s=ready_timeout_s,
    )
    with tempfile.TemporaryDirectory() as logs:
        running = launch(spec, Path(logs), lambda s: answers(s.base_url, s.model))
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(running)


def page(text: str, against: str, config: Path | None, model: str) -> str:
    """The results page: what was compared, with the command, then the table."""
    import datetime

    day = datetime.date.today().isoformat()
    where = config or "deploy/ray/local.yaml"
    return (
        "# Conformance with vLLM\n\n"
        f"Generated on {day} by `slomesh conformance --against {against}` (model `{model}`): "
        "every case sent to bare vLLM (`python -m vllm.entrypoints.openai.api_server`, started "
        f"with the engine arguments of the first vLLM replica of `{where}`) and to the "
        "deployment, one at a time; bodies compared after removing only ids, timestamps and "
        "fingerprints, streams reassembled per choice (slomesh/conformance/).\n\n" + text
    )


def run_conformance(args: argparse.Namespace) -> int:
    from slomesh.conformance.adapters import adapter_cases, replica_adapters
    from slomesh.conformance.corpus import corpus
    from slomesh.conformance.run import run, table
    from slomesh.launch import mesh

    config = mesh.load_config(args.config or mesh.CONFIGS["vllm"])
    replica = vllm_replica_args(config)
    model = args.model or replica["model"]
    names = [a.name for a in replica_adapters(replica)]
    every = [*corpus(model), *adapter_cases(names)]  # adapters: requests naming them as model
    cases = [c for c in every if not args.only or args.only in c.name]
    headers = {"authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    with contextlib.ExitStack() as stack:
        reference = args.reference or stack.enter_context(reference_server(replica, args.port))
        rows = run(cases, reference, args.against, headers)
    text = table(rows)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(page(text, args.against, args.config, model) + "\n")
    return 0 if all(r.same for r in rows) else 1

"""Ray Serve LLM's OpenAI app (`ray.serve.llm.build_openai_app`) on one vLLM engine, as a
process of its own for `bench-mesh --compare` (the peer system it is measured against).

`python -m slomesh.bench.compare.ray_llm_app --model DIR --name NAME --port P --engine-json J`
starts Ray (8 logical CPUs), Serve's HTTP proxy on 127.0.0.1:P and the app with the engine
keyword arguments J (the same ones slomesh's replicas give vLLM), prints "ready" and serves until
SIGINT/SIGTERM. Needs pyarrow, pandas, hf_transfer and pybind11 (`pip install -e '.[bench]'`);
a failing import exits 3 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ray_llm_app")
    p.add_argument("--model", required=True, help="checkpoint directory")
    p.add_argument("--name", required=True, help="served model id")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--engine-json", default="{}", help="vLLM engine keyword arguments (JSON)")
    p.add_argument("--num-cpus", type=int, default=8)
    return p.parse_args(argv)


def llm_config_dict(model: str, name: str, engine_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The LLMConfig fields of one fixed replica of `model` served as `name`."""
    return {
        "model_loading_config": {"model_id": name, "model_source": model},
        "engine_kwargs": {k: v for k, v in engine_kwargs.items() if k != "model"},
        "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1}},
        "placement_group_config": {"bundles": [{"CPU": 1}]},
    }


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        import ray
        from ray import serve
        from ray.serve.llm import LLMConfig, build_openai_app
    except ImportError as err:
        print(f"ray.serve.llm cannot be imported: {err}", file=sys.stderr)
        return 3
    engine = json.loads(args.engine_json)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": args.port})
        config = LLMConfig(**llm_config_dict(args.model, args.name, engine))
        serve.run(build_openai_app({"llm_configs": [config]}), blocking=False)
        print("ready", flush=True)
        done = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: done.set())
        done.wait()
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

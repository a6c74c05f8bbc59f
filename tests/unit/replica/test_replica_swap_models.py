"""A simulated replica with swap_models: requests of each listed model are served, the replica
swaps to the model asked for, Status reports it, and an unlisted model is refused."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.replica.args import ReplicaArgs
from services.replica.build import model_args
from services.replica.deployment import ReplicaDeployment
from shared.rpc.invalid_argument import InvalidMessage
from shared.rpc.mesh_auth import MESH_TOKEN_ENV, MESH_TOKEN_METADATA
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2
from tests.unit.replica.simulated_replica import SIMULATED_REPLICA_ARGS

ARGS = {**SIMULATED_REPLICA_ARGS, "swap_models": {"mistral-7b": {}}}


def generate(model: str, rid: str) -> replica_pb2.ReplicaGenerateRequest:
    meta = common_pb2.RequestMeta(
        request_id=rid,
        model=model,
        input_tokens=8,
        max_tokens=3,
        arrival_unix_s=time.time(),
        slo=common_pb2.Slo(ttft_slo_ms=60_000, class_name="batch-1"),
    )
    return replica_pb2.ReplicaGenerateRequest(meta=meta, prompt="hello", ignore_eos=True)


async def collect(replica, model: str, rid: str) -> list[replica_pb2.ReplicaChunk]:
    return [c async for c in replica.Generate(generate(model, rid))]


def test_replica_serves_each_listed_model_swapping_between_them():
    async def main():
        replica = ReplicaDeployment.func_or_class(dict(ARGS))
        before = await replica.Status(replica_pb2.StatusQuery())
        a = await collect(replica, "mistral-7b", "r1")
        after = await replica.Status(replica_pb2.StatusQuery())
        b = await collect(replica, "llama-3.1-8b", "r2")
        return before, a, after, b, replica._host

    before, a, after, b, host = asyncio.run(main())
    assert before.active_model == "llama-3.1-8b"
    assert after.active_model == "mistral-7b"
    for chunks in (a, b):
        assert chunks[-1].finished and chunks[-1].output_tokens == 3
    assert [(s.from_model, s.to_model, s.ok) for s in host.swaps] == [
        ("llama-3.1-8b", "mistral-7b", True),
        ("mistral-7b", "llama-3.1-8b", True),
    ]


def test_the_swap_log_reports_every_measured_swap():
    async def main():
        replica = ReplicaDeployment.func_or_class(dict(ARGS))
        empty = await replica.SwapLog()
        await collect(replica, "mistral-7b", "r1")
        return empty, await replica.SwapLog(), replica._host

    empty, log, host = asyncio.run(main())
    assert empty == {"swaps": [], "failed_requests": 0}
    assert log["failed_requests"] == 0
    [swap] = log["swaps"]
    assert (swap["from_model"], swap["to_model"], swap["ok"]) == (
        "llama-3.1-8b",
        "mistral-7b",
        True,
    )
    assert swap["seconds"] == host.swaps[0].seconds


def test_a_replica_of_one_model_logs_no_swaps():
    args = {k: v for k, v in ARGS.items() if k != "swap_models"}
    replica = ReplicaDeployment.func_or_class(args)
    assert asyncio.run(replica.SwapLog()) == {"swaps": [], "failed_requests": 0}


def test_replica_refuses_a_model_it_does_not_list():
    async def main():
        replica = ReplicaDeployment.func_or_class(dict(ARGS))
        return await collect(replica, "llama-2-70b", "r1")

    with pytest.raises(InvalidMessage, match="model 'llama-2-70b' is not served by replica"):
        asyncio.run(main())


def test_model_args_put_the_swap_models_settings_over_the_replicas():
    args = ReplicaArgs.model_validate(
        {
            "engine": "vllm",
            "model": "a",
            "vllm": {"model": "/m/a", "served_model_name": "a", "max_num_seqs": 4},
            "swap_models": {"b": {"vllm": {"model": "/m/b"}}},
        }
    )
    b = model_args(args, "b")
    assert (b.model, b.swap_models) == ("b", {})
    assert b.vllm == {"model": "/m/b", "served_model_name": "b", "max_num_seqs": 4}
    assert model_args(args, "a").vllm == args.vllm


def test_the_schedulers_swap_model_call_swaps_with_nothing_of_the_model_asked_for():
    async def main():
        replica = ReplicaDeployment.func_or_class(dict(ARGS))
        await replica.Status(replica_pb2.StatusQuery())
        reply = await replica.SwapModel(replica_pb2.ModelSwapOrder(model="mistral-7b"))
        for _ in range(200):  # the swap runs in the background (a simulated load time)
            if replica._host.swaps:
                break
            await asyncio.sleep(0.01)
        after = await replica.Status(replica_pb2.StatusQuery())
        served = await collect(replica, "mistral-7b", "r1")
        with pytest.raises(ValueError, match="not served by this replica"):
            await replica.SwapModel(replica_pb2.ModelSwapOrder(model="other"))
        return reply, after, served, replica._host

    reply, after, served, host = asyncio.run(main())
    assert reply.model == "mistral-7b"
    assert after.active_model == "mistral-7b"
    assert served[-1].finished
    assert [(s.from_model, s.to_model) for s in host.swaps] == [("llama-3.1-8b", "mistral-7b")]


@pytest.mark.parametrize("swap_models", [{}, {"mistral-7b": {}}])
def test_a_swap_to_a_model_not_served_is_invalid_argument(
    monkeypatch: pytest.MonkeyPatch, swap_models: dict[str, dict[str, object]]
) -> None:
    """The caller's fault, answered as one (INVALID_ARGUMENT naming the method), not INTERNAL."""
    import grpc

    monkeypatch.setenv(MESH_TOKEN_ENV, "s3cret")

    class Context:
        code: object = None

        def invocation_metadata(self) -> list[tuple[str, str]]:
            return [(MESH_TOKEN_METADATA, "s3cret")]

        def set_code(self, code: object) -> None:
            self.code = code

        def set_details(self, details: str) -> None:
            self.details = details

    async def main() -> Context:
        replica = ReplicaDeployment.func_or_class({**ARGS, "swap_models": swap_models})
        ctx = Context()
        with pytest.raises(InvalidMessage, match=r"replica\.SwapModel: .*'other' is not served"):
            await replica.SwapModel(replica_pb2.ModelSwapOrder(model="other"), ctx)
        return ctx

    assert asyncio.run(main()).code == grpc.StatusCode.INVALID_ARGUMENT

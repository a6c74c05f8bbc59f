"""The ingress's FastAPI app in process (no Ray, no mesh): `IngressDeployment` built with a test
double for the mesh client that answers predictor.Predict/Observe/Batch,
scheduler.Admit/Report/Health and replica.Generate like the real services do (replica.Generate
answers the forwarded OpenAI call with vLLM-shaped bodies: vllm_double.py).

`sim_replica` (module-scoped) is a real replica's OpenAI serving instead: vLLM's own OpenAI
application over a simulated engine (services/replica/openai_serving.py), for tests that check
vLLM's actual answers through the ingress (`ServingMesh`)."""

from __future__ import annotations

import types
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sim_replica import SimReplica
from vllm_double import vllm_answer

from shared.rpc.client import CallFailed
from shared.rpc.convert import request_from_meta
from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2, replica_pb2, scheduler_pb2

MODELS = [{"name": "llama", "max_model_len": 4096}, {"name": "qwen", "max_model_len": 2048}]


def _wire(message: Any) -> Any:
    """The message as the callee receives it: serialized and parsed, as either transport
    does (a string that is not valid UTF-8 fails here, as it would on the wire)."""
    return type(message).FromString(message.SerializeToString())


class FakeMesh:
    """MeshClient's interface (`call`, `stream`, `close`) answering like the real services.

    admit: scheduler.Admit admits (True) or rejects with `retry_after_s` (429 when > 0, else 503).
    output_words: words a replica generates per choice before "stop" (capped by the body's
        max_tokens, else the admitted budget: "length").
    down: applications that fail every call with UNAVAILABLE.
    crash: raise this from replica.Generate's first chunk (an unexpected exception).
    admit_to: the replicas scheduler.Admit places on, in turn.
    ready: the models scheduler.Health reports ready (a replica has answered; default: all).
    served: the names the replica's vLLM serves (default: every model; add adapters' names).
    """

    def __init__(
        self,
        *,
        admit: bool = True,
        retry_after_s: float = 0.0,
        output_words: int = 3,
        down: tuple[str, ...] = (),
        crash: BaseException | None = None,
        admit_to: tuple[str, ...] = ("replica-0",),
        ready: tuple[str, ...] = tuple(m["name"] for m in MODELS),
        served: tuple[str, ...] = tuple(m["name"] for m in MODELS),
    ) -> None:
        self.served = list(served)
        self.admit_to = admit_to
        self.ready = ready
        self._admits = 0
        self.admit = admit
        self.retry_after_s = retry_after_s
        self.output_words = output_words
        self.down = down
        self.crash = crash
        self.calls: list[tuple[str, str]] = []
        self.fed: list[tuple[str, str, int]] = []
        """predictor.Batch items in the order received: (kind, request id, output tokens)."""
        self.closed = False
        self.forwarded: list[replica_pb2.ReplicaGenerateRequest] = []
        """replica.Generate requests as the replica received them."""

    async def call(
        self,
        application: str,
        kind: str,
        method: str,
        message: Any,
        timeout_s: float | None = None,
    ) -> Any:
        self.calls.append((application, method))
        if application in self.down:
            raise CallFailed(application, "UNAVAILABLE", "down")
        request = _wire(message)
        if (kind, method) == ("predictor", "Predict"):
            return common_pb2.LengthPrediction(
                mean_tokens=40.0, p50_tokens=32.0, p90_tokens=90.0, predictor_version="fake"
            )
        if (kind, method) == ("predictor", "Observe"):
            return predictor_pb2.ObserveReply(observations=1)
        if (kind, method) == ("predictor", "Batch"):
            for item in request.items:
                work = item.WhichOneof("work")
                part = item.predict if work == "predict" else item.observe
                tokens = item.observe.output_tokens if work == "observe" else 0
                self.fed.append((str(work), part.meta.request_id, tokens))
            return predictor_pb2.PredictorBatchReply(done=len(request.items))
        if (kind, method) == ("scheduler", "Admit"):
            if not self.admit:
                return scheduler_pb2.AdmitReply(
                    admitted=False,
                    reason="queue full: cannot meet the TTFT deadline",
                    retry_after_s=self.retry_after_s,
                    stack="fake",
                )
            app = self.admit_to[self._admits % len(self.admit_to)]
            self._admits += 1
            replica = common_pb2.ReplicaRef(application=app, gpu="cpu", model=request.meta.model)
            return scheduler_pb2.AdmitReply(admitted=True, replica=replica, stack="fake")
        if (kind, method) == ("scheduler", "Report"):
            return scheduler_pb2.ReportReply()
        if (kind, method) == ("scheduler", "Sync"):
            # batched placements and reports: recorded (and answered) as the calls they replace
            for item in request.items:
                work = str(item.WhichOneof("work"))
                await self.call(application, kind, work.capitalize(), getattr(item, work))
            return self.grant()
        if (kind, method) == ("scheduler", "Health"):
            reason = "" if self.admit else "every replica full"
            return scheduler_pb2.HealthReply(
                can_admit=self.admit, reason=reason, ready_models=self.ready
            )
        raise CallFailed(application, "UNIMPLEMENTED", f"{kind}.{method}")

    def grant(self) -> scheduler_pb2.LeaseGrant:
        """The answer to `Sync`: no credits."""
        return scheduler_pb2.LeaseGrant()

    async def stream(
        self,
        application: str,
        kind: str,
        method: str,
        message: Any,
        trace_headers: dict[str, str] | None = None,
    ) -> AsyncIterator[Any]:
        self.calls.append((application, method))
        if application in self.down:
            raise CallFailed(application, "UNAVAILABLE", "down")
        if (kind, method) != ("replica", "Generate"):
            raise CallFailed(application, "UNIMPLEMENTED", f"{kind}.{method}")
        request = _wire(message)
        if self.crash is not None:
            raise self.crash
        self.forwarded.append(request)
        # the replica's accept marker (services/replica/deployment.py): an empty first chunk
        yield replica_pb2.ReplicaChunk(request_id=request.meta.request_id)
        for chunk in vllm_answer(request, self.output_words, self.served):
            yield chunk

    async def close(self) -> None:
        self.closed = True


def deployment_class() -> type[Any]:
    """IngressDeployment's own class, under Serve's deployment and ASGI-ingress wrappers."""
    from services.ingress.deployment import IngressDeployment

    wrapper = IngressDeployment.func_or_class
    user_class: type[Any] = wrapper.__bases__[0]
    assert user_class.__name__ == "IngressDeployment", wrapper.__mro__
    return user_class


def build_ingress(monkeypatch: pytest.MonkeyPatch, mesh: FakeMesh, **args: Any) -> tuple[Any, Any]:
    """(the FastAPI app, the deployment instance) with `mesh` as its mesh client. The routes
    find their `self` through Serve's replica context, patched to the instance."""
    import ray.serve

    from services.ingress.deployment import app

    config = {"models": MODELS, "tracing": {"exporter": "none"}, **args}
    instance = deployment_class()(config)
    instance.pipeline.client = mesh
    context = types.SimpleNamespace(servable_object=instance)
    monkeypatch.setattr(ray.serve, "get_replica_context", lambda: context)
    return app, instance


@pytest.fixture
def mesh() -> FakeMesh:
    return FakeMesh()


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, mesh: FakeMesh) -> Iterator[TestClient]:
    """A TestClient on the ingress app with the default FakeMesh (server exceptions come back
    as responses, as a real server sends them)."""
    app, _ = build_ingress(monkeypatch, mesh)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


class ServingMesh(FakeMesh):
    """FakeMesh whose replica.Generate is a real replica's OpenAI serving (`sim_replica`)."""

    def __init__(self, replica: SimReplica, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.replica = replica

    async def stream(
        self,
        application: str,
        kind: str,
        method: str,
        message: Any,
        trace_headers: dict[str, str] | None = None,
    ) -> AsyncIterator[Any]:
        self.calls.append((application, method))
        request = _wire(message)
        self.forwarded.append(request)
        yield replica_pb2.ReplicaChunk(request_id=request.meta.request_id)
        async for chunk in self.replica.serve(request_from_meta(request.meta), request.http):
            yield chunk


@pytest.fixture(scope="module")
def sim_replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimReplica]:
    """vLLM's OpenAI application on a simulated engine serving "llama" (context 4096) with the
    tiny model's tokenizer, on its own event loop thread (built once per module)."""
    replica = SimReplica.start(tmp_path_factory.mktemp("tiny") / "tiny-llama", "llama", 4096)
    try:
        yield replica
    finally:
        replica.stop()

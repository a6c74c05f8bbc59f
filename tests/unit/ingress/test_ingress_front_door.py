"""The ingress replicas' own HTTP door: its settings, the gate that stands in for
Serve's proxy (429 past the in-flight limit, cancel on disconnect), the shared socket, and a
real uvicorn door started and stopped on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from services.ingress.args import IngressArgs
from services.ingress.core.front_door import FrontDoorConfig, base_url
from services.ingress.front_door import DROP_REASON, DoorGate, FrontDoor, open_listener
from slomesh.launch.front_door import door_port_taken, door_url


@pytest.mark.parametrize(
    ("settings", "field", "rule"),
    [
        ({"host": "localhost"}, "host", "IP address literal or 'node'"),
        ({"host": "10.0.0.300"}, "host", "IP address literal"),
        ({"port": 0}, "port", "greater than or equal to 1"),
        ({"port": 65536}, "port", "less than or equal to 65535"),
        ({"max_in_flight_requests": 0}, "max_in_flight_requests", "greater than or equal to 1"),
        ({"retry_after_s": 0}, "retry_after_s", "greater than 0"),
        ({"graceful_shutdown_s": -1}, "graceful_shutdown_s", "greater than or equal to 0"),
        ({"prot": 8100}, "prot", "Extra inputs are not permitted"),
    ],
)
def test_front_door_config_rejects_bad_values_naming_the_field(
    settings: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ValidationError) as err:
        IngressArgs.model_validate({"models": [{"name": "m"}], "front_door": settings})
    text = str(err.value)
    assert f"front_door.{field}" in text and rule in text, text


@pytest.mark.parametrize(
    ("settings", "url"),
    [
        ({}, "http://127.0.0.1:8100/v1"),
        ({"host": "0.0.0.0", "port": 9100}, "http://127.0.0.1:9100/v1"),
        ({"host": "::1"}, "http://[::1]:8100/v1"),
        ({"host": "::"}, "http://[::1]:8100/v1"),
        ({"host": "10.1.2.3"}, "http://10.1.2.3:8100/v1"),
        ({"host": "node"}, "http://127.0.0.1:8100/v1"),
    ],
)
def test_front_door_url(settings: dict[str, Any], url: str) -> None:
    assert base_url(FrontDoorConfig.model_validate(settings)) == url


@pytest.mark.parametrize(
    ("settings", "ongoing", "queued", "limit"),
    [({}, 64, 32, 96), ({}, 8, 1, 9), ({"max_in_flight_requests": 5}, 64, 32, 5)],
)
def test_front_door_in_flight_limit(
    settings: dict[str, Any], ongoing: int, queued: int, limit: int
) -> None:
    assert FrontDoorConfig.model_validate(settings).in_flight_limit(ongoing, queued) == limit


@pytest.mark.parametrize(
    ("ingress_args", "url"),
    [
        ({}, "http://127.0.0.1:8100/v1"),
        ({"front_door": {"port": 8111}}, "http://127.0.0.1:8111/v1"),
        ({"front_door": {"enabled": False}}, None),
    ],
)
def test_mesh_config_door_url(ingress_args: dict[str, Any], url: str | None) -> None:
    config = {
        "applications": [
            {
                "name": "ingress",
                "import_path": "services.ingress.deployment:build_app",
                "args": ingress_args,
            }
        ]
    }
    assert door_url(config) == url


class _Blocked:
    """An ASGI app that reads the body, then waits until released (or cancelled)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = 0
        self.cancelled = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.entered += 1
        while (await receive()).get("more_body", False):
            pass
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def test_gate_answers_429_with_retry_after_past_the_limit() -> None:
    async def scenario() -> tuple[list[httpx.Response], DoorGate]:
        app = _Blocked()
        gate = DoorGate(app, limit=2, retry_after_s=2.5)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=gate), base_url="http://d")
        held = [asyncio.create_task(client.post("/v1/completions", content=b"{}")) for _ in (1, 2)]
        while app.entered < 2:
            await asyncio.sleep(0)
        over = await client.post("/v1/completions", content=b"{}")
        app.release.set()
        done = [await t for t in held]
        after = await client.post("/v1/completions", content=b"{}")
        await client.aclose()
        return [over, *done, after], gate

    (over, first, second, after), gate = asyncio.run(scenario())
    assert over.status_code == 429
    assert over.headers["retry-after"] == "3"
    assert over.headers["x-slomesh-drop-reason"] == DROP_REASON
    error = over.json()["error"]
    assert error["type"] == "rate_limit_exceeded" and "2 requests at once" in error["message"]
    assert [first.status_code, second.status_code, after.status_code] == [200, 200, 200]
    assert gate.in_flight == 0 and gate.rejected == 1


@pytest.mark.parametrize(
    ("messages", "cancelled"),
    [
        # the client leaves after sending its body, before any answer: the request is cancelled
        ([{"type": "http.request", "body": b"{}"}, {"type": "http.disconnect"}], 1),
        # a body in two parts, then the disconnect
        (
            [
                {"type": "http.request", "body": b"{", "more_body": True},
                {"type": "http.request", "body": b"}"},
                {"type": "http.disconnect"},
            ],
            1,
        ),
    ],
)
def test_gate_cancels_a_request_whose_client_left(
    messages: list[dict[str, Any]], cancelled: int
) -> None:
    async def scenario() -> tuple[_Blocked, DoorGate, list[Any]]:
        app = _Blocked()
        gate = DoorGate(app, limit=4, retry_after_s=1.0)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for m in messages:
            queue.put_nowait(m)
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
        await asyncio.wait_for(gate(scope, queue.get, send), 5)  # returns: not hung
        return app, gate, sent

    app, gate, sent = asyncio.run(scenario())
    assert app.cancelled == cancelled and gate.in_flight == 0 and sent == []


def test_gate_does_not_cancel_a_finished_answer() -> None:
    async def scenario() -> _Blocked:
        app = _Blocked()
        app.release.set()
        gate = DoorGate(app, limit=4, retry_after_s=1.0)
        got = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if not got.is_set():
                got.set()
                return {"type": "http.request", "body": b"{}"}
            return {"type": "http.disconnect"}  # the connection closes after the answer

        async def send(message: Any) -> None:
            return None

        scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
        await gate(scope, receive, send)
        return app

    assert asyncio.run(scenario()).cancelled == 0


def test_gate_stops_a_stream_whose_client_left_mid_answer() -> None:
    """The app behind the gate sees ASGI spec 2.4 (Starlette's StreamingResponse then runs no
    disconnect listener of its own): a stream whose client leaves after its first piece is
    cancelled by the gate, not streamed on."""
    from starlette.responses import StreamingResponse

    seen: dict[str, Any] = {"pieces": 0}

    async def pieces() -> Any:
        try:
            for _ in range(1000):
                seen["pieces"] += 1
                yield b"data: x\n\n"
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["spec"] = scope["asgi"]["spec_version"]
        await receive()
        await StreamingResponse(pieces(), media_type="text/event-stream")(scope, receive, send)

    async def scenario() -> list[Any]:
        gate = DoorGate(app, limit=4, retry_after_s=1.0)
        first_piece = asyncio.Event()
        sent: list[Any] = []
        calls = [0]

        async def receive() -> dict[str, Any]:
            calls[0] += 1
            if calls[0] == 1:
                return {"type": "http.request", "body": b"{}"}
            await first_piece.wait()
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            sent.append(message)
            if message.get("body"):
                first_piece.set()

        scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "asgi": {}}
        await asyncio.wait_for(gate(scope, receive, send), 5)  # returns: not hung
        return sent

    sent = asyncio.run(scenario())
    assert seen["spec"] == "2.4" and seen.get("cancelled") is True
    assert seen["pieces"] < 1000 and not any(m.get("more_body") is False for m in sent)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_listeners_share_a_port_and_another_program_holding_it_is_named() -> None:
    port = _free_port()
    a = open_listener("127.0.0.1", port, 16)
    b = open_listener("127.0.0.1", port, 16)  # a second replica of the node: same port
    a.close()
    b.close()
    with socket.socket() as plain:  # a listener without SO_REUSEPORT (another program)
        plain.bind(("127.0.0.1", port))
        plain.listen(1)
        with pytest.raises(RuntimeError, match=r"front_door\.port"):
            open_listener("127.0.0.1", port, 16)
        config = {
            "applications": [
                {
                    "import_path": "services.ingress.deployment:build_app",
                    "args": {"front_door": {"port": port}},
                }
            ]
        }
        assert "front_door.port" in (door_port_taken(config) or "")


def test_door_serves_the_app_and_closes_on_stop() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps({"ok": 1}).encode()})

    async def scenario() -> tuple[int, bool]:
        port = _free_port()
        door = FrontDoor(FrontDoorConfig(port=port, graceful_shutdown_s=1), limit=8)
        ready: list[Any] = []
        door.start(lambda: ready[0] if ready else None, poll_s=0.001)
        ready.append(app)
        async with httpx.AsyncClient() as client:
            while door.gate is None or not door._server or not door._server.started:
                await asyncio.sleep(0.01)
            status = (await client.get(f"http://127.0.0.1:{port}/")).status_code
        await door.stop()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                refused = False
        except OSError:
            refused = True
        return status, refused

    assert asyncio.run(scenario()) == (200, True)

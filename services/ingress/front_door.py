"""The ingress replica's own HTTP server: the OpenAI API without Serve's proxy hop.

Serve's HTTP proxy is a separate process: each request, and each streamed chunk, crosses it
(HTTP parsing there, a Serve handle call, a pickled message per chunk back). Here each ingress
replica runs uvicorn on its own event loop with the app Serve built for it (same routes, same
handlers: auth, limits, OpenAI errors, Retry-After, tracing), on a socket every replica of the
node binds with SO_REUSEPORT (one port per node; the kernel spreads connections over the
replicas). Serve's proxy door stays as it was.

What the proxy did that the door does itself (`DoorGate`):
- **Backpressure.** The proxy queued at most max_queued_at_proxy requests per replica and then
  answered 429; the door answers 429 + Retry-After (OpenAI's shape, drop reason
  `ingress-at-capacity`) at once past `in_flight_limit` requests, before any handler runs.
- **Disconnects.** The proxy cancelled a request whose client went away; Starlette does so for
  streams only, so the gate cancels a request whose client disconnected before its answer was
  complete (the replica stream closes, the engine aborts the request). Since the gate watches
  for the disconnect, the app sees ASGI's HTTP spec 2.4 (uvicorn says 2.3): Starlette's
  streaming responses then send from the request's own task, without a task group and a second
  task per response listening for the same disconnect.
Shutdown: when Serve stops the replica it ends the app's lifespan (`door_lifespan`), which
stops the door: no new connections at once, requests in flight get `graceful_shutdown_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.ingress.core.errors import overloaded
from services.ingress.core.front_door import NODE_ADDRESS, FrontDoorConfig
from services.ingress.http_api import error_response

log = logging.getLogger("slomesh.ingress")

DROP_REASON = "ingress-at-capacity"


class DoorGate:
    """ASGI wrapper: at most `limit` HTTP requests at once (beyond, 429 at once), and a request
    whose client left before its answer completed is cancelled."""

    def __init__(self, app: ASGIApp, limit: int, retry_after_s: float) -> None:
        self.app = app
        self.limit = limit
        self.retry_after_s = retry_after_s
        self.in_flight = 0
        self.rejected = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            self.rejected += 1
            err = overloaded(
                f"this ingress replica serves {self.limit} requests at once "
                "(front_door.max_in_flight_requests); retry later",
                self.retry_after_s,
                drop_reason=DROP_REASON,
            )
            await error_response(err)(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self._run(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _run(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        state = {"answered": False, "left": False}
        watcher: asyncio.Task[None] | None = None

        async def watch() -> None:
            # once the body is read, the next message is the disconnect (or the end of the
            # response): a client gone before the answer was complete cancels the request
            while (await receive())["type"] != "http.disconnect":
                pass
            if not state["answered"] and task is not None:
                state["left"] = True
                task.cancel()

        async def recv() -> Message:
            nonlocal watcher
            message = await receive()
            if (
                watcher is None
                and message["type"] == "http.request"
                and not message.get("more_body", False)
            ):
                watcher = asyncio.create_task(watch())
            return message

        async def sent(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                state["answered"] = True
            await send(message)

        try:
            await self.app(_spec_2_4(scope), recv, sent)
        except asyncio.CancelledError:
            if not state["left"] or task is None:
                raise
            task.uncancel()  # our own cancel: the client left, nothing to answer
        finally:
            if watcher is not None:
                watcher.cancel()


class _Server(uvicorn.Server):
    """uvicorn inside a Serve replica: signals stay Ray's."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def bind_address(host: str) -> str:
    """The address to bind: "node" is this Ray node's IP, anything else is taken as is."""
    if host != NODE_ADDRESS:
        return host
    import ray

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def open_listener(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on host:port shared with the node's other ingress replicas
    (SO_REUSEPORT); an address taken by another kind of socket fails naming the field."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as err:
        sock.close()
        raise RuntimeError(
            f"front_door: cannot listen on {host}:{port} ({err.strerror}); another program holds "
            "the port: stop it or set the ingress's front_door.port"
        ) from err
    return sock


def _spec_2_4(scope: Scope) -> Scope:
    """`scope` as ASGI HTTP spec 2.4 (the gate cancels a request whose client left, which 2.4
    lets a server promise instead of a disconnect listener per streamed response)."""
    return {**scope, "asgi": {**scope.get("asgi", {}), "spec_version": "2.4"}}


class FrontDoor:
    """One replica's door: the socket is bound at construction (a taken port fails the replica
    at start), uvicorn starts serving once `start` finds the app ready."""

    def __init__(self, config: FrontDoorConfig, limit: int) -> None:
        self.config = config
        self.limit = limit
        self.host = bind_address(config.host)
        self.sock = open_listener(self.host, config.port, config.backlog)
        self.gate: DoorGate | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.config.port}"

    def start(self, app: Callable[[], ASGIApp | None], poll_s: float = 0.02) -> None:
        """Serve on the running loop once `app()` returns the app (Serve sets it, and the replica
        context its routes resolve `self` from, after the constructor)."""
        self._task = asyncio.get_running_loop().create_task(self._serve(app, poll_s))

    async def _serve(self, app: Callable[[], ASGIApp | None], poll_s: float) -> None:
        ready = app()
        while ready is None:
            await asyncio.sleep(poll_s)
            ready = app()
        self.gate = DoorGate(ready, self.limit, self.config.retry_after_s)
        config = uvicorn.Config(
            self.gate,
            lifespan="off",  # Serve ran the app's lifespan
            log_config=None,
            access_log=False,
            server_header=False,
            proxy_headers=False,
            ws="none",
            timeout_graceful_shutdown=self.config.graceful_shutdown_s,
            timeout_keep_alive=self.config.keep_alive_s,
        )
        self._server = _Server(config)
        log.info("front door serving on %s", self.address)
        await self._server.serve(sockets=[self.sock])

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish (graceful_shutdown_s), close."""
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, self.config.graceful_shutdown_s + 2.0)
            except (TimeoutError, asyncio.CancelledError):
                pass
            except Exception:
                log.exception("front door stopped with an error")
        self.sock.close()


def in_serve_replica() -> bool:
    """True inside a Serve replica (the door opens there only, never in tests that build the
    deployment class in process)."""
    from ray import serve
    from ray.serve.exceptions import RayServeException

    try:
        serve.get_replica_context()
    except RayServeException:
        return False
    return True


def serving_app(instance: Any) -> ASGIApp | None:
    """The app Serve built for this replica, once the replica context points at `instance`."""
    from ray import serve

    try:
        ready = serve.get_replica_context().servable_object is not None
    except Exception:
        return None
    app: ASGIApp | None = getattr(instance, "_asgi_app", None)
    return app if ready else None


@contextlib.asynccontextmanager
async def door_lifespan(_app: Any) -> AsyncIterator[None]:
    """The app's lifespan: at its end (Serve stopping the replica) the replica's doors close
    (HTTP and gRPC)."""
    yield
    from ray import serve

    try:
        instance = serve.get_replica_context().servable_object
    except Exception:
        return
    door = getattr(instance, "_door", None)
    if isinstance(door, FrontDoor):
        await door.stop()
    grpc_door = getattr(instance, "_grpc_door", None)  # grpc_door.GrpcDoor
    if grpc_door is not None:
        await grpc_door.stop()

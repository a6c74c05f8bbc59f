"""Opening an ingress replica's own listeners: the HTTP front door (front_door.py) and the gRPC
door (grpc_door.py), each where the ingress's args say. Both close at the end of the app's
lifespan (`front_door.door_lifespan`), when Serve stops the replica."""

from __future__ import annotations

from typing import Any

from services.ingress.front_door import FrontDoor, serving_app
from services.ingress.grpc_door import GrpcDoor


def open_doors(deployment: Any) -> tuple[FrontDoor | None, GrpcDoor | None]:
    """Bind and start the enabled doors of `deployment` (an IngressDeployment inside a Serve
    replica, on its event loop); a port another program holds fails the replica, naming the
    field."""
    args = deployment.args
    http_limit = args.front_door.in_flight_limit(
        args.max_ongoing_requests, args.max_queued_at_proxy
    )
    door: FrontDoor | None = None
    if args.front_door.enabled:
        door = FrontDoor(args.front_door, http_limit)
        door.start(lambda: serving_app(deployment))
    grpc_door: GrpcDoor | None = None
    if args.grpc_door.enabled:
        limit = args.grpc_door.max_in_flight_requests or http_limit
        try:
            grpc_door = GrpcDoor(deployment, args.grpc_door, limit)
        except BaseException:
            if door is not None:
                door.sock.close()
            raise
        grpc_door.start()
    return door, grpc_door

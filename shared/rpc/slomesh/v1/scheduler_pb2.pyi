from shared.rpc.slomesh.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdmitRequest(_message.Message):
    __slots__ = ("meta", "prediction", "resume_output_tokens")
    META_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    RESUME_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    meta: _common_pb2.RequestMeta
    prediction: _common_pb2.LengthPrediction
    resume_output_tokens: int
    def __init__(self, meta: _Optional[_Union[_common_pb2.RequestMeta, _Mapping]] = ..., prediction: _Optional[_Union[_common_pb2.LengthPrediction, _Mapping]] = ..., resume_output_tokens: _Optional[int] = ...) -> None: ...

class AdmitReply(_message.Message):
    __slots__ = ("admitted", "replica", "reason", "retry_after_s", "stack", "drop_reason", "slice_tokens")
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_S_FIELD_NUMBER: _ClassVar[int]
    STACK_FIELD_NUMBER: _ClassVar[int]
    DROP_REASON_FIELD_NUMBER: _ClassVar[int]
    SLICE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    admitted: bool
    replica: _common_pb2.ReplicaRef
    reason: str
    retry_after_s: float
    stack: str
    drop_reason: str
    slice_tokens: int
    def __init__(self, admitted: _Optional[bool] = ..., replica: _Optional[_Union[_common_pb2.ReplicaRef, _Mapping]] = ..., reason: _Optional[str] = ..., retry_after_s: _Optional[float] = ..., stack: _Optional[str] = ..., drop_reason: _Optional[str] = ..., slice_tokens: _Optional[int] = ...) -> None: ...

class CompletionReport(_message.Message):
    __slots__ = ("meta", "replica", "first_token_unix_s", "finish_unix_s", "output_tokens", "finish_reason")
    META_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    FIRST_TOKEN_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    FINISH_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    meta: _common_pb2.RequestMeta
    replica: _common_pb2.ReplicaRef
    first_token_unix_s: float
    finish_unix_s: float
    output_tokens: int
    finish_reason: str
    def __init__(self, meta: _Optional[_Union[_common_pb2.RequestMeta, _Mapping]] = ..., replica: _Optional[_Union[_common_pb2.ReplicaRef, _Mapping]] = ..., first_token_unix_s: _Optional[float] = ..., finish_unix_s: _Optional[float] = ..., output_tokens: _Optional[int] = ..., finish_reason: _Optional[str] = ...) -> None: ...

class ReportReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthQuery(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthReply(_message.Message):
    __slots__ = ("can_admit", "reason", "queued", "in_flight", "ready_models", "shard", "shards", "replicas", "usage_staleness_s", "max_usage_staleness_s", "admitted_total", "fast_path_total")
    CAN_ADMIT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    READY_MODELS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    USAGE_STALENESS_S_FIELD_NUMBER: _ClassVar[int]
    MAX_USAGE_STALENESS_S_FIELD_NUMBER: _ClassVar[int]
    ADMITTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FAST_PATH_TOTAL_FIELD_NUMBER: _ClassVar[int]
    can_admit: bool
    reason: str
    queued: int
    in_flight: int
    ready_models: _containers.RepeatedScalarFieldContainer[str]
    shard: str
    shards: _containers.RepeatedScalarFieldContainer[str]
    replicas: _containers.RepeatedCompositeFieldContainer[ModelReplicas]
    usage_staleness_s: float
    max_usage_staleness_s: float
    admitted_total: int
    fast_path_total: int
    def __init__(self, can_admit: _Optional[bool] = ..., reason: _Optional[str] = ..., queued: _Optional[int] = ..., in_flight: _Optional[int] = ..., ready_models: _Optional[_Iterable[str]] = ..., shard: _Optional[str] = ..., shards: _Optional[_Iterable[str]] = ..., replicas: _Optional[_Iterable[_Union[ModelReplicas, _Mapping]]] = ..., usage_staleness_s: _Optional[float] = ..., max_usage_staleness_s: _Optional[float] = ..., admitted_total: _Optional[int] = ..., fast_path_total: _Optional[int] = ...) -> None: ...

class ModelReplicas(_message.Message):
    __slots__ = ("model", "ready")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    model: str
    ready: int
    def __init__(self, model: _Optional[str] = ..., ready: _Optional[int] = ...) -> None: ...

class TenantUsage(_message.Message):
    __slots__ = ("tenant", "charged")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    CHARGED_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    charged: float
    def __init__(self, tenant: _Optional[str] = ..., charged: _Optional[float] = ...) -> None: ...

class ShardUsage(_message.Message):
    __slots__ = ("shard", "epoch", "sent_unix_s", "tenants", "shards")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SENT_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    shard: str
    epoch: str
    sent_unix_s: float
    tenants: _containers.RepeatedCompositeFieldContainer[TenantUsage]
    shards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, shard: _Optional[str] = ..., epoch: _Optional[str] = ..., sent_unix_s: _Optional[float] = ..., tenants: _Optional[_Iterable[_Union[TenantUsage, _Mapping]]] = ..., shards: _Optional[_Iterable[str]] = ...) -> None: ...

class LeaseRequest(_message.Message):
    __slots__ = ("ingress_id",)
    INGRESS_ID_FIELD_NUMBER: _ClassVar[int]
    ingress_id: str
    def __init__(self, ingress_id: _Optional[str] = ...) -> None: ...

class ReplicaCredit(_message.Message):
    __slots__ = ("replica", "limit")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    replica: _common_pb2.ReplicaRef
    limit: int
    def __init__(self, replica: _Optional[_Union[_common_pb2.ReplicaRef, _Mapping]] = ..., limit: _Optional[int] = ...) -> None: ...

class LeaseGrant(_message.Message):
    __slots__ = ("epoch", "credits", "ttl_s")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    epoch: str
    credits: _containers.RepeatedCompositeFieldContainer[ReplicaCredit]
    ttl_s: float
    def __init__(self, epoch: _Optional[str] = ..., credits: _Optional[_Iterable[_Union[ReplicaCredit, _Mapping]]] = ..., ttl_s: _Optional[float] = ...) -> None: ...

class PlaceNotice(_message.Message):
    __slots__ = ("ingress_id", "admit", "replica")
    INGRESS_ID_FIELD_NUMBER: _ClassVar[int]
    ADMIT_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    ingress_id: str
    admit: AdmitRequest
    replica: _common_pb2.ReplicaRef
    def __init__(self, ingress_id: _Optional[str] = ..., admit: _Optional[_Union[AdmitRequest, _Mapping]] = ..., replica: _Optional[_Union[_common_pb2.ReplicaRef, _Mapping]] = ...) -> None: ...

class SyncItem(_message.Message):
    __slots__ = ("place", "report", "trace_headers")
    class TraceHeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PLACE_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    TRACE_HEADERS_FIELD_NUMBER: _ClassVar[int]
    place: PlaceNotice
    report: CompletionReport
    trace_headers: _containers.ScalarMap[str, str]
    def __init__(self, place: _Optional[_Union[PlaceNotice, _Mapping]] = ..., report: _Optional[_Union[CompletionReport, _Mapping]] = ..., trace_headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SyncBatch(_message.Message):
    __slots__ = ("ingress_id", "items")
    INGRESS_ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ingress_id: str
    items: _containers.RepeatedCompositeFieldContainer[SyncItem]
    def __init__(self, ingress_id: _Optional[str] = ..., items: _Optional[_Iterable[_Union[SyncItem, _Mapping]]] = ...) -> None: ...

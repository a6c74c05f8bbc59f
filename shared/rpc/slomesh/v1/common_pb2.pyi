from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Slo(_message.Message):
    __slots__ = ("ttft_slo_ms", "tpot_slo_ms", "deadline_ms", "class_name")
    TTFT_SLO_MS_FIELD_NUMBER: _ClassVar[int]
    TPOT_SLO_MS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    ttft_slo_ms: float
    tpot_slo_ms: float
    deadline_ms: float
    class_name: str
    def __init__(self, ttft_slo_ms: _Optional[float] = ..., tpot_slo_ms: _Optional[float] = ..., deadline_ms: _Optional[float] = ..., class_name: _Optional[str] = ...) -> None: ...

class RequestMeta(_message.Message):
    __slots__ = ("request_id", "model", "input_tokens", "max_tokens", "priority", "slo", "tenant", "arrival_unix_s", "criticality", "tenant_weight", "prefix_block_hashes", "prefix_block_size_tokens", "adapter")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    CRITICALITY_FIELD_NUMBER: _ClassVar[int]
    TENANT_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PREFIX_BLOCK_HASHES_FIELD_NUMBER: _ClassVar[int]
    PREFIX_BLOCK_SIZE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model: str
    input_tokens: int
    max_tokens: int
    priority: int
    slo: Slo
    tenant: str
    arrival_unix_s: float
    criticality: int
    tenant_weight: float
    prefix_block_hashes: _containers.RepeatedScalarFieldContainer[int]
    prefix_block_size_tokens: int
    adapter: str
    def __init__(self, request_id: _Optional[str] = ..., model: _Optional[str] = ..., input_tokens: _Optional[int] = ..., max_tokens: _Optional[int] = ..., priority: _Optional[int] = ..., slo: _Optional[_Union[Slo, _Mapping]] = ..., tenant: _Optional[str] = ..., arrival_unix_s: _Optional[float] = ..., criticality: _Optional[int] = ..., tenant_weight: _Optional[float] = ..., prefix_block_hashes: _Optional[_Iterable[int]] = ..., prefix_block_size_tokens: _Optional[int] = ..., adapter: _Optional[str] = ...) -> None: ...

class LengthPrediction(_message.Message):
    __slots__ = ("mean_tokens", "p50_tokens", "p90_tokens", "bucket_upper_tokens", "bucket_probs", "predictor_version")
    MEAN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    P50_TOKENS_FIELD_NUMBER: _ClassVar[int]
    P90_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_UPPER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_PROBS_FIELD_NUMBER: _ClassVar[int]
    PREDICTOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    mean_tokens: float
    p50_tokens: float
    p90_tokens: float
    bucket_upper_tokens: _containers.RepeatedScalarFieldContainer[int]
    bucket_probs: _containers.RepeatedScalarFieldContainer[float]
    predictor_version: str
    def __init__(self, mean_tokens: _Optional[float] = ..., p50_tokens: _Optional[float] = ..., p90_tokens: _Optional[float] = ..., bucket_upper_tokens: _Optional[_Iterable[int]] = ..., bucket_probs: _Optional[_Iterable[float]] = ..., predictor_version: _Optional[str] = ...) -> None: ...

class ReplicaRef(_message.Message):
    __slots__ = ("application", "gpu", "model")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    application: str
    gpu: str
    model: str
    def __init__(self, application: _Optional[str] = ..., gpu: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class ReplicaState(_message.Message):
    __slots__ = ("replica", "active_model", "waiting", "running", "evicted", "kv_used_blocks", "kv_total_blocks", "engine", "request_ids", "pending_prefill_tokens", "loaded_adapters", "waiting_prefill", "deadline_ordered", "swapping")
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_MODEL_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    EVICTED_FIELD_NUMBER: _ClassVar[int]
    KV_USED_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    KV_TOTAL_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    PENDING_PREFILL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOADED_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    WAITING_PREFILL_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_ORDERED_FIELD_NUMBER: _ClassVar[int]
    SWAPPING_FIELD_NUMBER: _ClassVar[int]
    replica: ReplicaRef
    active_model: str
    waiting: int
    running: int
    evicted: int
    kv_used_blocks: int
    kv_total_blocks: int
    engine: str
    request_ids: _containers.RepeatedScalarFieldContainer[str]
    pending_prefill_tokens: int
    loaded_adapters: _containers.RepeatedScalarFieldContainer[str]
    waiting_prefill: _containers.RepeatedCompositeFieldContainer[WaitingPrefill]
    deadline_ordered: bool
    swapping: bool
    def __init__(self, replica: _Optional[_Union[ReplicaRef, _Mapping]] = ..., active_model: _Optional[str] = ..., waiting: _Optional[int] = ..., running: _Optional[int] = ..., evicted: _Optional[int] = ..., kv_used_blocks: _Optional[int] = ..., kv_total_blocks: _Optional[int] = ..., engine: _Optional[str] = ..., request_ids: _Optional[_Iterable[str]] = ..., pending_prefill_tokens: _Optional[int] = ..., loaded_adapters: _Optional[_Iterable[str]] = ..., waiting_prefill: _Optional[_Iterable[_Union[WaitingPrefill, _Mapping]]] = ..., deadline_ordered: _Optional[bool] = ..., swapping: _Optional[bool] = ...) -> None: ...

class WaitingPrefill(_message.Message):
    __slots__ = ("ttft_deadline_unix_s", "tokens")
    TTFT_DEADLINE_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    ttft_deadline_unix_s: float
    tokens: int
    def __init__(self, ttft_deadline_unix_s: _Optional[float] = ..., tokens: _Optional[int] = ...) -> None: ...

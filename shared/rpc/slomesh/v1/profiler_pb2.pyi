from shared.rpc.slomesh.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EstimateRequest(_message.Message):
    __slots__ = ("meta", "prediction", "gpu")
    META_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    meta: _common_pb2.RequestMeta
    prediction: _common_pb2.LengthPrediction
    gpu: str
    def __init__(self, meta: _Optional[_Union[_common_pb2.RequestMeta, _Mapping]] = ..., prediction: _Optional[_Union[_common_pb2.LengthPrediction, _Mapping]] = ..., gpu: _Optional[str] = ...) -> None: ...

class EstimateReply(_message.Message):
    __slots__ = ("prefill_ms", "decode_ms_per_token", "kv_bytes", "profile_source")
    PREFILL_MS_FIELD_NUMBER: _ClassVar[int]
    DECODE_MS_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KV_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_SOURCE_FIELD_NUMBER: _ClassVar[int]
    prefill_ms: float
    decode_ms_per_token: float
    kv_bytes: int
    profile_source: str
    def __init__(self, prefill_ms: _Optional[float] = ..., decode_ms_per_token: _Optional[float] = ..., kv_bytes: _Optional[int] = ..., profile_source: _Optional[str] = ...) -> None: ...

class GetProfileRequest(_message.Message):
    __slots__ = ("gpu", "model", "tensor_parallel")
    GPU_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    gpu: str
    model: str
    tensor_parallel: int
    def __init__(self, gpu: _Optional[str] = ..., model: _Optional[str] = ..., tensor_parallel: _Optional[int] = ...) -> None: ...

class Profile(_message.Message):
    __slots__ = ("gpu", "model", "tensor_parallel", "prefill_coeffs_s", "decode_coeffs_s", "kv_capacity_bytes", "kv_bytes_per_token", "weight_bytes", "swap_bytes_per_s", "cold_load_bytes_per_s", "inefficiency", "source", "submit_overhead_s", "delivery_overhead_s")
    GPU_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    PREFILL_COEFFS_S_FIELD_NUMBER: _ClassVar[int]
    DECODE_COEFFS_S_FIELD_NUMBER: _ClassVar[int]
    KV_CAPACITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    KV_BYTES_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BYTES_FIELD_NUMBER: _ClassVar[int]
    SWAP_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    COLD_LOAD_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    INEFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_OVERHEAD_S_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_OVERHEAD_S_FIELD_NUMBER: _ClassVar[int]
    gpu: str
    model: str
    tensor_parallel: int
    prefill_coeffs_s: _containers.RepeatedScalarFieldContainer[float]
    decode_coeffs_s: _containers.RepeatedScalarFieldContainer[float]
    kv_capacity_bytes: int
    kv_bytes_per_token: int
    weight_bytes: int
    swap_bytes_per_s: float
    cold_load_bytes_per_s: float
    inefficiency: float
    source: str
    submit_overhead_s: float
    delivery_overhead_s: float
    def __init__(self, gpu: _Optional[str] = ..., model: _Optional[str] = ..., tensor_parallel: _Optional[int] = ..., prefill_coeffs_s: _Optional[_Iterable[float]] = ..., decode_coeffs_s: _Optional[_Iterable[float]] = ..., kv_capacity_bytes: _Optional[int] = ..., kv_bytes_per_token: _Optional[int] = ..., weight_bytes: _Optional[int] = ..., swap_bytes_per_s: _Optional[float] = ..., cold_load_bytes_per_s: _Optional[float] = ..., inefficiency: _Optional[float] = ..., source: _Optional[str] = ..., submit_overhead_s: _Optional[float] = ..., delivery_overhead_s: _Optional[float] = ...) -> None: ...

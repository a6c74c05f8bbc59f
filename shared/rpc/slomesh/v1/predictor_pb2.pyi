from shared.rpc.slomesh.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PredictRequest(_message.Message):
    __slots__ = ("meta", "prompt")
    META_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    meta: _common_pb2.RequestMeta
    prompt: str
    def __init__(self, meta: _Optional[_Union[_common_pb2.RequestMeta, _Mapping]] = ..., prompt: _Optional[str] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("meta", "output_tokens")
    META_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    meta: _common_pb2.RequestMeta
    output_tokens: int
    def __init__(self, meta: _Optional[_Union[_common_pb2.RequestMeta, _Mapping]] = ..., output_tokens: _Optional[int] = ...) -> None: ...

class ObserveReply(_message.Message):
    __slots__ = ("observations",)
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    observations: int
    def __init__(self, observations: _Optional[int] = ...) -> None: ...

class PredictorWork(_message.Message):
    __slots__ = ("predict", "observe", "trace_headers")
    class TraceHeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PREDICT_FIELD_NUMBER: _ClassVar[int]
    OBSERVE_FIELD_NUMBER: _ClassVar[int]
    TRACE_HEADERS_FIELD_NUMBER: _ClassVar[int]
    predict: PredictRequest
    observe: Observation
    trace_headers: _containers.ScalarMap[str, str]
    def __init__(self, predict: _Optional[_Union[PredictRequest, _Mapping]] = ..., observe: _Optional[_Union[Observation, _Mapping]] = ..., trace_headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class PredictorBatch(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[PredictorWork]
    def __init__(self, items: _Optional[_Iterable[_Union[PredictorWork, _Mapping]]] = ...) -> None: ...

class PredictorBatchReply(_message.Message):
    __slots__ = ("observations", "done")
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    observations: int
    done: int
    def __init__(self, observations: _Optional[int] = ..., done: _Optional[int] = ...) -> None: ...

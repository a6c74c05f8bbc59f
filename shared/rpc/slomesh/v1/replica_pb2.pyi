from shared.rpc.slomesh.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaGenerateRequest(_message.Message):
    __slots__ = ("meta", "prompt", "temperature", "simulated_output_tokens", "ignore_eos", "slice_tokens", "prior_output_tokens", "context_token_ids", "http")
    META_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    SLICE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PRIOR_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    meta: _common_pb2.RequestMeta
    prompt: str
    temperature: float
    simulated_output_tokens: int
    ignore_eos: bool
    slice_tokens: int
    prior_output_tokens: int
    context_token_ids: _containers.RepeatedScalarFieldContainer[int]
    http: HttpCall
    def __init__(self, meta: _Optional[_Union[_common_pb2.RequestMeta, _Mapping]] = ..., prompt: _Optional[str] = ..., temperature: _Optional[float] = ..., simulated_output_tokens: _Optional[int] = ..., ignore_eos: _Optional[bool] = ..., slice_tokens: _Optional[int] = ..., prior_output_tokens: _Optional[int] = ..., context_token_ids: _Optional[_Iterable[int]] = ..., http: _Optional[_Union[HttpCall, _Mapping]] = ...) -> None: ...

class StreamOpen(_message.Message):
    __slots__ = ("stream_id", "request", "trace_headers")
    class TraceHeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TRACE_HEADERS_FIELD_NUMBER: _ClassVar[int]
    stream_id: int
    request: ReplicaGenerateRequest
    trace_headers: _containers.ScalarMap[str, str]
    def __init__(self, stream_id: _Optional[int] = ..., request: _Optional[_Union[ReplicaGenerateRequest, _Mapping]] = ..., trace_headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StreamsUp(_message.Message):
    __slots__ = ("open", "cancel")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    open: _containers.RepeatedCompositeFieldContainer[StreamOpen]
    cancel: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, open: _Optional[_Iterable[_Union[StreamOpen, _Mapping]]] = ..., cancel: _Optional[_Iterable[int]] = ...) -> None: ...

class StreamEvent(_message.Message):
    __slots__ = ("stream_id", "chunk", "end", "status", "detail")
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    stream_id: int
    chunk: ReplicaChunk
    end: bool
    status: str
    detail: str
    def __init__(self, stream_id: _Optional[int] = ..., chunk: _Optional[_Union[ReplicaChunk, _Mapping]] = ..., end: _Optional[bool] = ..., status: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class StreamsDown(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[StreamEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[StreamEvent, _Mapping]]] = ...) -> None: ...

class HttpCall(_message.Message):
    __slots__ = ("method", "path", "headers", "body")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    method: str
    path: str
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    body: bytes
    def __init__(self, method: _Optional[str] = ..., path: _Optional[str] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., body: _Optional[bytes] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class ReplicaChunk(_message.Message):
    __slots__ = ("request_id", "text", "output_tokens", "finished", "finish_reason", "time_unix_s", "context_token_ids", "http_status", "headers", "body", "prompt_tokens")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    TIME_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    text: str
    output_tokens: int
    finished: bool
    finish_reason: str
    time_unix_s: float
    context_token_ids: _containers.RepeatedScalarFieldContainer[int]
    http_status: int
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    body: bytes
    prompt_tokens: int
    def __init__(self, request_id: _Optional[str] = ..., text: _Optional[str] = ..., output_tokens: _Optional[int] = ..., finished: _Optional[bool] = ..., finish_reason: _Optional[str] = ..., time_unix_s: _Optional[float] = ..., context_token_ids: _Optional[_Iterable[int]] = ..., http_status: _Optional[int] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., body: _Optional[bytes] = ..., prompt_tokens: _Optional[int] = ...) -> None: ...

class RequestIds(_message.Message):
    __slots__ = ("request_ids",)
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    request_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class StatusQuery(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelSwapOrder(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

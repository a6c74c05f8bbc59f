from shared.rpc.slomesh.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaGenerateRequest(_message.Message):
    __slots__ = ("meta", "prompt", "temperature", "simulated_output_tokens", "ignore_eos", "slice_tokens", "prior_output_tokens", "context_token_ids")
    META_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    SLICE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PRIOR_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    meta: _common_pb2.RequestMeta
    prompt: str
    temperature: float
    simulated_output_tokens: int
    ignore_eos: bool
    slice_tokens: int
    prior_output_tokens: int
    context_token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, meta: _Optional[_Union[_common_pb2.RequestMeta, _Mapping]] = ..., prompt: _Optional[str] = ..., temperature: _Optional[float] = ..., simulated_output_tokens: _Optional[int] = ..., ignore_eos: _Optional[bool] = ..., slice_tokens: _Optional[int] = ..., prior_output_tokens: _Optional[int] = ..., context_token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class ReplicaChunk(_message.Message):
    __slots__ = ("request_id", "text", "output_tokens", "finished", "finish_reason", "time_unix_s", "context_token_ids")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    TIME_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    text: str
    output_tokens: int
    finished: bool
    finish_reason: str
    time_unix_s: float
    context_token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, request_id: _Optional[str] = ..., text: _Optional[str] = ..., output_tokens: _Optional[int] = ..., finished: _Optional[bool] = ..., finish_reason: _Optional[str] = ..., time_unix_s: _Optional[float] = ..., context_token_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class RequestIds(_message.Message):
    __slots__ = ("request_ids",)
    REQUEST_IDS_FIELD_NUMBER: _ClassVar[int]
    request_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class StatusQuery(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

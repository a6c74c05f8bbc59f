from shared.rpc.slomesh.v1 import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
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

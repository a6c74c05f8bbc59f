from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Node(_message.Message):
    __slots__ = ("name", "gpu", "gpus")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    name: str
    gpu: str
    gpus: int
    def __init__(self, name: _Optional[str] = ..., gpu: _Optional[str] = ..., gpus: _Optional[int] = ...) -> None: ...

class ModelDemand(_message.Message):
    __slots__ = ("model", "replicas")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    model: str
    replicas: int
    def __init__(self, model: _Optional[str] = ..., replicas: _Optional[int] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ("nodes", "models", "engine")
    NODES_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    models: _containers.RepeatedCompositeFieldContainer[ModelDemand]
    engine: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., models: _Optional[_Iterable[_Union[ModelDemand, _Mapping]]] = ..., engine: _Optional[str] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("application", "node", "gpu", "model", "tensor_parallel")
    APPLICATION_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    application: str
    node: str
    gpu: str
    model: str
    tensor_parallel: int
    def __init__(self, application: _Optional[str] = ..., node: _Optional[str] = ..., gpu: _Optional[str] = ..., model: _Optional[str] = ..., tensor_parallel: _Optional[int] = ...) -> None: ...

class PlanReply(_message.Message):
    __slots__ = ("placements", "serve_config_yaml", "unplaced")
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    SERVE_CONFIG_YAML_FIELD_NUMBER: _ClassVar[int]
    UNPLACED_FIELD_NUMBER: _ClassVar[int]
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    serve_config_yaml: str
    unplaced: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ..., serve_config_yaml: _Optional[str] = ..., unplaced: _Optional[_Iterable[str]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

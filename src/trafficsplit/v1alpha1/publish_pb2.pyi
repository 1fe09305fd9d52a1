from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Endpoint(_message.Message):
    __slots__ = ("address", "port", "ready")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    address: str
    port: int
    ready: bool
    def __init__(self, address: _Optional[str] = ..., port: _Optional[int] = ..., ready: _Optional[bool] = ...) -> None: ...

class Backend(_message.Message):
    __slots__ = ("name", "weight", "cluster", "service", "port", "endpoints", "drain")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: int
    cluster: str
    service: str
    port: int
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    drain: bool
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[int] = ..., cluster: _Optional[str] = ..., service: _Optional[str] = ..., port: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., drain: _Optional[bool] = ...) -> None: ...

class Cookie(_message.Message):
    __slots__ = ("name", "path", "max_age", "domain", "secure", "http_only", "same_site", "partitioned")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    SECURE_FIELD_NUMBER: _ClassVar[int]
    HTTP_ONLY_FIELD_NUMBER: _ClassVar[int]
    SAME_SITE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONED_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    max_age: int
    domain: str
    secure: bool
    http_only: bool
    same_site: str
    partitioned: bool
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., max_age: _Optional[int] = ..., domain: _Optional[str] = ..., secure: _Optional[bool] = ..., http_only: _Optional[bool] = ..., same_site: _Optional[str] = ..., partitioned: _Optional[bool] = ...) -> None: ...

class Match(_message.Message):
    __slots__ = ("kind", "name", "type", "value", "backend")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        HEADER: _ClassVar[Match.Kind]
        COOKIE: _ClassVar[Match.Kind]
    HEADER: Match.Kind
    COOKIE: Match.Kind
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        EXACT: _ClassVar[Match.Type]
        REGULAR_EXPRESSION: _ClassVar[Match.Type]
    EXACT: Match.Type
    REGULAR_EXPRESSION: Match.Type
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    kind: Match.Kind
    name: str
    type: Match.Type
    value: str
    backend: str
    def __init__(self, kind: _Optional[_Union[Match.Kind, str]] = ..., name: _Optional[str] = ..., type: _Optional[_Union[Match.Type, str]] = ..., value: _Optional[str] = ..., backend: _Optional[str] = ...) -> None: ...

class Split(_message.Message):
    __slots__ = ("namespace", "name", "hosts", "backends", "cookie", "endpoint_affinity", "matches", "debug_headers", "observed_generation", "endpoint_points", "key_header", "assignment", "persistent", "first_generation")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    COOKIE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    DEBUG_HEADERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_POINTS_FIELD_NUMBER: _ClassVar[int]
    KEY_HEADER_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_FIELD_NUMBER: _ClassVar[int]
    FIRST_GENERATION_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    hosts: _containers.RepeatedScalarFieldContainer[str]
    backends: _containers.RepeatedCompositeFieldContainer[Backend]
    cookie: Cookie
    endpoint_affinity: bool
    matches: _containers.RepeatedCompositeFieldContainer[Match]
    debug_headers: bool
    observed_generation: int
    endpoint_points: int
    key_header: str
    assignment: Assignment
    persistent: bool
    first_generation: int
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., hosts: _Optional[_Iterable[str]] = ..., backends: _Optional[_Iterable[_Union[Backend, _Mapping]]] = ..., cookie: _Optional[_Union[Cookie, _Mapping]] = ..., endpoint_affinity: _Optional[bool] = ..., matches: _Optional[_Iterable[_Union[Match, _Mapping]]] = ..., debug_headers: _Optional[bool] = ..., observed_generation: _Optional[int] = ..., endpoint_points: _Optional[int] = ..., key_header: _Optional[str] = ..., assignment: _Optional[_Union[Assignment, _Mapping]] = ..., persistent: _Optional[bool] = ..., first_generation: _Optional[int] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("slots", "owners", "lengths")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    LENGTHS_FIELD_NUMBER: _ClassVar[int]
    slots: int
    owners: _containers.RepeatedScalarFieldContainer[int]
    lengths: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, slots: _Optional[int] = ..., owners: _Optional[_Iterable[int]] = ..., lengths: _Optional[_Iterable[int]] = ...) -> None: ...

class Generation(_message.Message):
    __slots__ = ("number", "splits", "origin")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    SPLITS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    number: int
    splits: _containers.RepeatedCompositeFieldContainer[Split]
    origin: str
    def __init__(self, number: _Optional[int] = ..., splits: _Optional[_Iterable[_Union[Split, _Mapping]]] = ..., origin: _Optional[str] = ...) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ("generation",)
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: Generation
    def __init__(self, generation: _Optional[_Union[Generation, _Mapping]] = ...) -> None: ...

class Capabilities(_message.Message):
    __slots__ = ("cookie_keys",)
    COOKIE_KEYS_FIELD_NUMBER: _ClassVar[int]
    cookie_keys: bool
    def __init__(self, cookie_keys: _Optional[bool] = ...) -> None: ...

class SplitRefusal(_message.Message):
    __slots__ = ("split", "reason", "message")
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    split: str
    reason: str
    message: str
    def __init__(self, split: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class PublishReply(_message.Message):
    __slots__ = ("result", "held_number", "message", "replica", "refused", "capabilities", "instance")
    class Result(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RESULT_UNSPECIFIED: _ClassVar[PublishReply.Result]
        ACCEPTED: _ClassVar[PublishReply.Result]
        STALE: _ClassVar[PublishReply.Result]
        INVALID: _ClassVar[PublishReply.Result]
        NOT_READY: _ClassVar[PublishReply.Result]
    RESULT_UNSPECIFIED: PublishReply.Result
    ACCEPTED: PublishReply.Result
    STALE: PublishReply.Result
    INVALID: PublishReply.Result
    NOT_READY: PublishReply.Result
    RESULT_FIELD_NUMBER: _ClassVar[int]
    HELD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    result: PublishReply.Result
    held_number: int
    message: str
    replica: str
    refused: _containers.RepeatedCompositeFieldContainer[SplitRefusal]
    capabilities: Capabilities
    instance: str
    def __init__(self, result: _Optional[_Union[PublishReply.Result, str]] = ..., held_number: _Optional[int] = ..., message: _Optional[str] = ..., replica: _Optional[str] = ..., refused: _Optional[_Iterable[_Union[SplitRefusal, _Mapping]]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., instance: _Optional[str] = ...) -> None: ...

class GetHeldRequest(_message.Message):
    __slots__ = ("with_generation",)
    WITH_GENERATION_FIELD_NUMBER: _ClassVar[int]
    with_generation: bool
    def __init__(self, with_generation: _Optional[bool] = ...) -> None: ...

class HeldReply(_message.Message):
    __slots__ = ("held_number", "replica", "origin", "generation", "sessions", "capabilities", "instance", "refused")
    HELD_NUMBER_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    held_number: int
    replica: str
    origin: str
    generation: Generation
    sessions: _containers.RepeatedCompositeFieldContainer[LiveSessions]
    capabilities: Capabilities
    instance: str
    refused: _containers.RepeatedCompositeFieldContainer[SplitRefusal]
    def __init__(self, held_number: _Optional[int] = ..., replica: _Optional[str] = ..., origin: _Optional[str] = ..., generation: _Optional[_Union[Generation, _Mapping]] = ..., sessions: _Optional[_Iterable[_Union[LiveSessions, _Mapping]]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., instance: _Optional[str] = ..., refused: _Optional[_Iterable[_Union[SplitRefusal, _Mapping]]] = ...) -> None: ...

class LiveSessions(_message.Message):
    __slots__ = ("split", "backend", "live", "saturated")
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    SATURATED_FIELD_NUMBER: _ClassVar[int]
    split: str
    backend: str
    live: int
    saturated: bool
    def __init__(self, split: _Optional[str] = ..., backend: _Optional[str] = ..., live: _Optional[int] = ..., saturated: _Optional[bool] = ...) -> None: ...

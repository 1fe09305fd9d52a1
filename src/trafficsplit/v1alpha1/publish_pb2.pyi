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
    __slots__ = ("name", "weight", "cluster", "service", "port", "endpoints", "drain", "h2c", "tls")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    H2C_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: int
    cluster: str
    service: str
    port: int
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    drain: bool
    h2c: bool
    tls: UpstreamTls
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[int] = ..., cluster: _Optional[str] = ..., service: _Optional[str] = ..., port: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., drain: _Optional[bool] = ..., h2c: _Optional[bool] = ..., tls: _Optional[_Union[UpstreamTls, _Mapping]] = ...) -> None: ...

class UpstreamTls(_message.Message):
    __slots__ = ("sni", "ca_pem", "system_ca", "subject_alt_names")
    SNI_FIELD_NUMBER: _ClassVar[int]
    CA_PEM_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CA_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_ALT_NAMES_FIELD_NUMBER: _ClassVar[int]
    sni: str
    ca_pem: bytes
    system_ca: bool
    subject_alt_names: _containers.RepeatedCompositeFieldContainer[SubjectAltName]
    def __init__(self, sni: _Optional[str] = ..., ca_pem: _Optional[bytes] = ..., system_ca: _Optional[bool] = ..., subject_alt_names: _Optional[_Iterable[_Union[SubjectAltName, _Mapping]]] = ...) -> None: ...

class SubjectAltName(_message.Message):
    __slots__ = ("kind", "value")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        HOSTNAME: _ClassVar[SubjectAltName.Kind]
        URI: _ClassVar[SubjectAltName.Kind]
    HOSTNAME: SubjectAltName.Kind
    URI: SubjectAltName.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    kind: SubjectAltName.Kind
    value: str
    def __init__(self, kind: _Optional[_Union[SubjectAltName.Kind, str]] = ..., value: _Optional[str] = ...) -> None: ...

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

class RouteMatch(_message.Message):
    __slots__ = ("path_type", "path", "headers", "query_params", "method")
    class PathType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PATH_PREFIX: _ClassVar[RouteMatch.PathType]
        EXACT: _ClassVar[RouteMatch.PathType]
        REGULAR_EXPRESSION: _ClassVar[RouteMatch.PathType]
    PATH_PREFIX: RouteMatch.PathType
    EXACT: RouteMatch.PathType
    REGULAR_EXPRESSION: RouteMatch.PathType
    PATH_TYPE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    QUERY_PARAMS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    path_type: RouteMatch.PathType
    path: str
    headers: _containers.RepeatedCompositeFieldContainer[ValueMatch]
    query_params: _containers.RepeatedCompositeFieldContainer[ValueMatch]
    method: str
    def __init__(self, path_type: _Optional[_Union[RouteMatch.PathType, str]] = ..., path: _Optional[str] = ..., headers: _Optional[_Iterable[_Union[ValueMatch, _Mapping]]] = ..., query_params: _Optional[_Iterable[_Union[ValueMatch, _Mapping]]] = ..., method: _Optional[str] = ...) -> None: ...

class ValueMatch(_message.Message):
    __slots__ = ("type", "name", "value")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        EXACT: _ClassVar[ValueMatch.Type]
        REGULAR_EXPRESSION: _ClassVar[ValueMatch.Type]
    EXACT: ValueMatch.Type
    REGULAR_EXPRESSION: ValueMatch.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    type: ValueMatch.Type
    name: str
    value: str
    def __init__(self, type: _Optional[_Union[ValueMatch.Type, str]] = ..., name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class RouteEntry(_message.Message):
    __slots__ = ("route", "rule", "match_index", "match")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    route: str
    rule: int
    match_index: int
    match: RouteMatch
    def __init__(self, route: _Optional[str] = ..., rule: _Optional[int] = ..., match_index: _Optional[int] = ..., match: _Optional[_Union[RouteMatch, _Mapping]] = ...) -> None: ...

class VirtualHost(_message.Message):
    __slots__ = ("hostname", "entries")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    entries: _containers.RepeatedCompositeFieldContainer[RouteEntry]
    def __init__(self, hostname: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[RouteEntry, _Mapping]]] = ...) -> None: ...

class ListenerRoutes(_message.Message):
    __slots__ = ("listener", "port", "hosts", "hostname", "certificate", "client_validation")
    LISTENER_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_VALIDATION_FIELD_NUMBER: _ClassVar[int]
    listener: str
    port: int
    hosts: _containers.RepeatedCompositeFieldContainer[VirtualHost]
    hostname: str
    certificate: Certificate
    client_validation: ClientValidation
    def __init__(self, listener: _Optional[str] = ..., port: _Optional[int] = ..., hosts: _Optional[_Iterable[_Union[VirtualHost, _Mapping]]] = ..., hostname: _Optional[str] = ..., certificate: _Optional[_Union[Certificate, _Mapping]] = ..., client_validation: _Optional[_Union[ClientValidation, _Mapping]] = ...) -> None: ...

class ClientValidation(_message.Message):
    __slots__ = ("ca_pem", "insecure_fallback")
    CA_PEM_FIELD_NUMBER: _ClassVar[int]
    INSECURE_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    ca_pem: bytes
    insecure_fallback: bool
    def __init__(self, ca_pem: _Optional[bytes] = ..., insecure_fallback: _Optional[bool] = ...) -> None: ...

class Certificate(_message.Message):
    __slots__ = ("chain_pem", "key_pem")
    CHAIN_PEM_FIELD_NUMBER: _ClassVar[int]
    KEY_PEM_FIELD_NUMBER: _ClassVar[int]
    chain_pem: bytes
    key_pem: bytes
    def __init__(self, chain_pem: _Optional[bytes] = ..., key_pem: _Optional[bytes] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class HeaderModifier(_message.Message):
    __slots__ = ("set", "add", "remove")
    SET_FIELD_NUMBER: _ClassVar[int]
    ADD_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    set: _containers.RepeatedCompositeFieldContainer[Header]
    add: _containers.RepeatedCompositeFieldContainer[Header]
    remove: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, set: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., add: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., remove: _Optional[_Iterable[str]] = ...) -> None: ...

class PathModifier(_message.Message):
    __slots__ = ("type", "value")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REPLACE_FULL_PATH: _ClassVar[PathModifier.Type]
        REPLACE_PREFIX_MATCH: _ClassVar[PathModifier.Type]
    REPLACE_FULL_PATH: PathModifier.Type
    REPLACE_PREFIX_MATCH: PathModifier.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    type: PathModifier.Type
    value: str
    def __init__(self, type: _Optional[_Union[PathModifier.Type, str]] = ..., value: _Optional[str] = ...) -> None: ...

class Redirect(_message.Message):
    __slots__ = ("scheme", "hostname", "path", "port", "status_code")
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    scheme: str
    hostname: str
    path: PathModifier
    port: int
    status_code: int
    def __init__(self, scheme: _Optional[str] = ..., hostname: _Optional[str] = ..., path: _Optional[_Union[PathModifier, _Mapping]] = ..., port: _Optional[int] = ..., status_code: _Optional[int] = ...) -> None: ...

class Rewrite(_message.Message):
    __slots__ = ("hostname", "path")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    path: PathModifier
    def __init__(self, hostname: _Optional[str] = ..., path: _Optional[_Union[PathModifier, _Mapping]] = ...) -> None: ...

class Cors(_message.Message):
    __slots__ = ("allow_origins", "allow_methods", "allow_headers", "expose_headers", "allow_credentials", "max_age")
    ALLOW_ORIGINS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_METHODS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_HEADERS_FIELD_NUMBER: _ClassVar[int]
    EXPOSE_HEADERS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_FIELD_NUMBER: _ClassVar[int]
    allow_origins: _containers.RepeatedScalarFieldContainer[str]
    allow_methods: _containers.RepeatedScalarFieldContainer[str]
    allow_headers: _containers.RepeatedScalarFieldContainer[str]
    expose_headers: _containers.RepeatedScalarFieldContainer[str]
    allow_credentials: bool
    max_age: int
    def __init__(self, allow_origins: _Optional[_Iterable[str]] = ..., allow_methods: _Optional[_Iterable[str]] = ..., allow_headers: _Optional[_Iterable[str]] = ..., expose_headers: _Optional[_Iterable[str]] = ..., allow_credentials: _Optional[bool] = ..., max_age: _Optional[int] = ...) -> None: ...

class Filters(_message.Message):
    __slots__ = ("request_headers", "response_headers", "redirect", "rewrite", "cors")
    REQUEST_HEADERS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_HEADERS_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_FIELD_NUMBER: _ClassVar[int]
    REWRITE_FIELD_NUMBER: _ClassVar[int]
    CORS_FIELD_NUMBER: _ClassVar[int]
    request_headers: HeaderModifier
    response_headers: HeaderModifier
    redirect: Redirect
    rewrite: Rewrite
    cors: Cors
    def __init__(self, request_headers: _Optional[_Union[HeaderModifier, _Mapping]] = ..., response_headers: _Optional[_Union[HeaderModifier, _Mapping]] = ..., redirect: _Optional[_Union[Redirect, _Mapping]] = ..., rewrite: _Optional[_Union[Rewrite, _Mapping]] = ..., cors: _Optional[_Union[Cors, _Mapping]] = ...) -> None: ...

class BackendTarget(_message.Message):
    __slots__ = ("backend", "namespace", "service", "port", "weight", "filters")
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    backend: str
    namespace: str
    service: str
    port: int
    weight: int
    filters: Filters
    def __init__(self, backend: _Optional[str] = ..., namespace: _Optional[str] = ..., service: _Optional[str] = ..., port: _Optional[int] = ..., weight: _Optional[int] = ..., filters: _Optional[_Union[Filters, _Mapping]] = ...) -> None: ...

class RuleAction(_message.Message):
    __slots__ = ("route", "rule", "split", "targets", "error_weight", "filters", "timeouts", "retry", "mirrors")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    ERROR_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    MIRRORS_FIELD_NUMBER: _ClassVar[int]
    route: str
    rule: int
    split: str
    targets: _containers.RepeatedCompositeFieldContainer[BackendTarget]
    error_weight: int
    filters: Filters
    timeouts: RuleTimeouts
    retry: RuleRetry
    mirrors: _containers.RepeatedCompositeFieldContainer[RequestMirror]
    def __init__(self, route: _Optional[str] = ..., rule: _Optional[int] = ..., split: _Optional[str] = ..., targets: _Optional[_Iterable[_Union[BackendTarget, _Mapping]]] = ..., error_weight: _Optional[int] = ..., filters: _Optional[_Union[Filters, _Mapping]] = ..., timeouts: _Optional[_Union[RuleTimeouts, _Mapping]] = ..., retry: _Optional[_Union[RuleRetry, _Mapping]] = ..., mirrors: _Optional[_Iterable[_Union[RequestMirror, _Mapping]]] = ...) -> None: ...

class RuleTimeouts(_message.Message):
    __slots__ = ("request_ms", "backend_request_ms")
    REQUEST_MS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_REQUEST_MS_FIELD_NUMBER: _ClassVar[int]
    request_ms: int
    backend_request_ms: int
    def __init__(self, request_ms: _Optional[int] = ..., backend_request_ms: _Optional[int] = ...) -> None: ...

class RuleRetry(_message.Message):
    __slots__ = ("attempts", "backoff_ms", "codes")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MS_FIELD_NUMBER: _ClassVar[int]
    CODES_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    backoff_ms: int
    codes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, attempts: _Optional[int] = ..., backoff_ms: _Optional[int] = ..., codes: _Optional[_Iterable[int]] = ...) -> None: ...

class RequestMirror(_message.Message):
    __slots__ = ("namespace", "service", "port", "numerator", "denominator", "endpoints", "tls")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    NUMERATOR_FIELD_NUMBER: _ClassVar[int]
    DENOMINATOR_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    service: str
    port: int
    numerator: int
    denominator: int
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    tls: UpstreamTls
    def __init__(self, namespace: _Optional[str] = ..., service: _Optional[str] = ..., port: _Optional[int] = ..., numerator: _Optional[int] = ..., denominator: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., tls: _Optional[_Union[UpstreamTls, _Mapping]] = ...) -> None: ...

class GatewayRoutes(_message.Message):
    __slots__ = ("gateway", "listeners", "actions", "gateway_uid", "backend_client_certificate")
    GATEWAY_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_UID_FIELD_NUMBER: _ClassVar[int]
    BACKEND_CLIENT_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    gateway: str
    listeners: _containers.RepeatedCompositeFieldContainer[ListenerRoutes]
    actions: _containers.RepeatedCompositeFieldContainer[RuleAction]
    gateway_uid: str
    backend_client_certificate: Certificate
    def __init__(self, gateway: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[ListenerRoutes, _Mapping]]] = ..., actions: _Optional[_Iterable[_Union[RuleAction, _Mapping]]] = ..., gateway_uid: _Optional[str] = ..., backend_client_certificate: _Optional[_Union[Certificate, _Mapping]] = ...) -> None: ...

class Generation(_message.Message):
    __slots__ = ("number", "splits", "origin", "routes")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    SPLITS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    number: int
    splits: _containers.RepeatedCompositeFieldContainer[Split]
    origin: str
    routes: GatewayRoutes
    def __init__(self, number: _Optional[int] = ..., splits: _Optional[_Iterable[_Union[Split, _Mapping]]] = ..., origin: _Optional[str] = ..., routes: _Optional[_Union[GatewayRoutes, _Mapping]] = ...) -> None: ...

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

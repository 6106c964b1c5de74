from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Header(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Context(_message.Message):
    __slots__ = ("namespace", "ingress", "service_name", "pod")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    INGRESS_FIELD_NUMBER: _ClassVar[int]
    SERVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    ingress: str
    service_name: str
    pod: str
    def __init__(self, namespace: _Optional[str] = ..., ingress: _Optional[str] = ..., service_name: _Optional[str] = ..., pod: _Optional[str] = ...) -> None: ...

class TLSAssertions(_message.Message):
    __slots__ = ("version", "negotiated_protocol", "server_name", "cipher_suite", "peer_certificates")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NEGOTIATED_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    CIPHER_SUITE_FIELD_NUMBER: _ClassVar[int]
    PEER_CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    version: str
    negotiated_protocol: str
    server_name: str
    cipher_suite: str
    peer_certificates: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, version: _Optional[str] = ..., negotiated_protocol: _Optional[str] = ..., server_name: _Optional[str] = ..., cipher_suite: _Optional[str] = ..., peer_certificates: _Optional[_Iterable[str]] = ...) -> None: ...

class Assertions(_message.Message):
    __slots__ = ("fully_qualified_method", "headers", "authority", "context", "tls_assertions")
    FULLY_QUALIFIED_METHOD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    AUTHORITY_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TLS_ASSERTIONS_FIELD_NUMBER: _ClassVar[int]
    fully_qualified_method: str
    headers: _containers.RepeatedCompositeFieldContainer[Header]
    authority: str
    context: Context
    tls_assertions: TLSAssertions
    def __init__(self, fully_qualified_method: _Optional[str] = ..., headers: _Optional[_Iterable[_Union[Header, _Mapping]]] = ..., authority: _Optional[str] = ..., context: _Optional[_Union[Context, _Mapping]] = ..., tls_assertions: _Optional[_Union[TLSAssertions, _Mapping]] = ...) -> None: ...

class EchoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EchoResponse(_message.Message):
    __slots__ = ("assertions", "request")
    ASSERTIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    assertions: Assertions
    request: EchoRequest
    def __init__(self, assertions: _Optional[_Union[Assertions, _Mapping]] = ..., request: _Optional[_Union[EchoRequest, _Mapping]] = ...) -> None: ...

"""No deprecated Envoy field or enum value in what gateweave builds.

Every Envoy of gateweave runs with ``--ignore-unknown-dynamic-fields``
(:func:`gateweave.infra.bootstrap.envoy_flags`), which skips Envoy's walk over each xDS update
for deprecated and unknown fields: a deprecated field would no longer be warned about, nor a
field deprecated fatally be refused. This test does that walk instead, over the resources
built for every conformance case, the benchmark's objects with Envoy Gateway policies, and
each of Envoy Gateway's examples: every field set, every enum value, inside ``Any`` too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from envoy.annotations import deprecation_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import symbol_database
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

import gateweave.xds.build  # noqa: F401  (imports every type packed in an Any)
from gateweave.snapshot import Snapshot
from gateweave.translate import TranslateOptions, translate
from gateweave.xds.build import build
from gateweave.xds.resources import Resources, pack
from gateweave_bench.objects import generate
from tests.support.conformance_objects import all_case_files, case_objects, decoded
from tests.support.data import EG_EXAMPLES, EG_QUICKSTART, yaml_files

_DB = symbol_database.Default()
EG_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"


def _deprecated_field(fd: FieldDescriptor) -> bool:
    options = fd.GetOptions()
    return options.deprecated or options.HasExtension(deprecation_pb2.deprecated_at_minor_version)


def _deprecated_value(fd: FieldDescriptor, number: int) -> str | None:
    value = fd.enum_type.values_by_number.get(number)
    if value is None:
        return None
    options = value.GetOptions()
    if options.deprecated or options.HasExtension(deprecation_pb2.deprecated_at_minor_version_enum):
        return str(value.name)
    return None


def deprecated_uses(message: Message, where: str = "") -> Iterator[str]:
    """Each deprecated field set and enum value used in ``message``, with where it is."""
    if message.DESCRIPTOR.full_name == "google.protobuf.Any":
        inner = _DB.GetSymbol(message.type_url.rpartition("/")[2])()
        message.Unpack(inner)
        yield from deprecated_uses(inner, f"{where}({inner.DESCRIPTOR.full_name})")
        return
    for fd, value in message.ListFields():
        at = f"{where}.{fd.name}"
        if _deprecated_field(fd):
            yield f"{fd.full_name} at {at}"
        if fd.type == FieldDescriptor.TYPE_ENUM:
            for number in value if fd.is_repeated else [value]:
                name = _deprecated_value(fd, number)
                if name is not None:
                    yield f"{fd.full_name} = {name} at {at}"
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            if fd.message_type.GetOptions().map_entry:
                items: list[Any] = list(value.values())
            else:
                items = list(value) if fd.is_repeated else [value]
            for item in items:
                if isinstance(item, Message):
                    yield from deprecated_uses(item, at)


def _uses(result: Any, what: str) -> list[str]:
    out: list[str] = []
    for name, gateway in sorted(result.xds.items()):
        resources = build(gateway)
        for f in fields(Resources):
            for resource_name, resource in getattr(resources, f.name).items():
                out += deprecated_uses(resource, f"{what} {name} {f.name} {resource_name}")
    return out


def test_the_walk_finds_a_deprecated_field_and_one_inside_an_any() -> None:
    route = route_components_pb2.Route(name="r")
    route.match.prefix = "/"
    route.match.headers.add(name="x", exact_match="y")  # HeaderMatcher.exact_match: deprecated
    config = route_pb2.RouteConfiguration(name="c")
    config.virtual_hosts.add(name="v", domains=["*"], routes=[route])
    assert list(deprecated_uses(config)) == [
        "envoy.config.route.v3.HeaderMatcher.exact_match"
        " at .virtual_hosts.routes.match.headers.exact_match"
    ]
    hcm = hcm_pb2.HttpConnectionManager(stat_prefix="s", route_config=config)
    listener = listener_pb2.Listener(name="l")
    listener.filter_chains.add().filters.add(name="hcm", typed_config=pack(hcm))
    found = list(deprecated_uses(listener))
    assert len(found) == 1 and found[0].startswith(
        "envoy.config.route.v3.HeaderMatcher.exact_match"
    )
    assert "(envoy.extensions.filters.network.http_connection_manager.v3" in found[0]


def test_conformance_cases_use_no_deprecated_field() -> None:
    found: list[str] = []
    for case_file in all_case_files():
        found += _uses(translate(Snapshot.from_objects(case_objects(case_file))), case_file)
    assert found == []


def test_policies_use_no_deprecated_field() -> None:
    objects = generate(300, policies=0.6)
    models = [decoded(raw).model for raw in objects.manifests]
    assert _uses(translate(Snapshot.from_objects(models)), "bench") == []


def _docs(paths: list[Path]) -> list[Any]:
    out = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append(decoded(doc).model)
    return out


@pytest.mark.parametrize(
    "example", sorted(p.name for p in EG_EXAMPLES.iterdir() if p.is_dir()), ids=str
)
def test_envoy_gateway_examples_use_no_deprecated_field(example: str) -> None:
    models = _docs([EG_QUICKSTART, *yaml_files(EG_EXAMPLES / example)])
    result = translate(
        Snapshot.from_objects(models), TranslateOptions(controller_name=EG_CONTROLLER)
    )
    assert result.xds, "the example's Gateway was translated"
    assert _uses(result, example) == []

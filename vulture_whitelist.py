"""Names that vulture (run by `python3 dev.py test`, configured in pyproject.toml) reports as
unused but that are used all the same: called by a framework by name, filled by decoding, or
looked up with getattr. Anything else it reports is dead code, to be removed, not listed here.
Never imported or run; `_` stands for any object."""

# Called by name: the CEL compiler's methods, one per grammar rule (getattr "c_" + rule).
_.c_expr, _.c_conditionalor, _.c_conditionaland, _.c_unary, _.c_member, _.c_primary
_.c_paren_expr, _.c_member_dot, _.c_member_index, _.c_member_dot_arg, _.c_ident_arg
_.c_dot_ident, _.c_list_lit, _.c_map_lit, _.c_literal
c_relation, c_addition, c_multiplication
# ... and the CEL writer's (gateweave/api/celcode.py, getattr "w_" + rule).
_.w_expr, _.w_conditionalor, _.w_conditionaland, _.w_unary, _.w_member_dot, _.w_member_index
_.w_member_dot_arg, _.w_ident_arg, _.w_list_lit, _.w_map_lit, _.w_literal
w_relation, w_addition, w_multiplication, w_primary, w_paren_expr, w_dot_ident

# Called by name: http.server and socketserver handlers, asyncio datagram protocols, the
# gRPC servicer, structlog's logger methods, pytest's hooks and module marks.
_.do_HEAD, _.do_POST, _.do_PUT, _.do_DELETE, _.log_message
_.server_version, _.protocol_version, _.disable_nagle_algorithm, _.daemon_threads
_.connection_made, _.datagram_received, _.error_received
_.DeltaAggregatedResources
_.warn, _.critical, _.fatal
pytest_sessionstart, pytest_sessionfinish, pytestmark

# Read by a library: google-re2 options, h2 connection settings, selenium's Chrome options.
_.log_errors, _.never_capture, _.local_settings, _.max_header_list_size, _.binary_location

# Encoded into /api/graph and read by the dashboard's JavaScript (gateweave/dashboard/static).
_.node_width, _.node_height

# Fields filled by decoding (the Gateway API and Kubernetes objects, conformance case files);
# translation does not read them (yet), the models keep the objects whole.
_.description, _.default_scope
_.use_default_gateways, _.external_name, _.load_balancer_ip
_.terminating, _.target_ref, _.binary_data
# An http_repeat step's keys, typed to check a case file; the http step reads them from the mapping.
_.server_certificate, _.expected_request, _.backend_set_response_headers
# An Envoy Gateway Backend's TLS settings gateweave does not implement: read (by field) only
# to refuse a Backend that sets one, by its name.
_.ciphers, _.ecdh_curves, _.signature_algorithms, _.min_version, _.max_version, _.fingerprints

# Snapshot fields set and read through the kind -> field table (setattr/getattr).
_.grpc_routes, _.tls_routes, _.tcp_routes, _.udp_routes

# A cache key: functools.lru_cache parses a manifest file again when it changes.
mtime_ns

# Condition reasons the Gateway API defines and no judgement sets yet; issue 17 (item 4,
# named condition constructors) decides each of them.
R_UNSUPPORTED_VERSION, R_NO_RESOURCES, R_INVALID_PARAMETERS_REF, R_PORT_UNAVAILABLE
R_LISTENER_CONFLICT, R_UNSUPPORTED_VALUE_ROUTE, R_TARGET_NOT_FOUND

# Snapshot fields read by kind name (Snapshot.by_kind, getattr): Envoy Gateway's policy kinds.
_.backend_traffic_policies, _.client_traffic_policies, _.security_policies

# Called only by the validator modules gateweave/api/codecache.py writes.
provide, Rule

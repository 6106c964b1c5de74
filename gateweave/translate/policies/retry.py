"""BackendTrafficPolicy ``retry`` and ``timeout.http.requestTimeout``: the retry policy and
timeout of the routes the policy governs, over the routes' own.

``retryOn.triggers`` are Envoy's ``retry_on`` conditions, ``httpStatusCodes`` add
``retriable-status-codes``; without ``retryOn``, Envoy Gateway's default (connection failures,
and 503). ``perRetry``: each attempt's ``timeout`` and the ``backOff`` between attempts.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateweave import ir
from gateweave.translate.policies import specvalue

FIELDS: frozenset[str] = frozenset(
    {
        "retry",
        "retry.numRetries",
        "retry.retryOn",
        "retry.retryOn.triggers",
        "retry.retryOn.httpStatusCodes",
        "retry.perRetry",
        "retry.perRetry.timeout",
        "retry.perRetry.backOff",
        "retry.perRetry.backOff.baseInterval",
        "retry.perRetry.backOff.maxInterval",
        "timeout",
        "timeout.http",
        "timeout.http.requestTimeout",
    }
)


class _BackOff(msgspec.Struct, frozen=True, rename="camel"):
    base_interval: str | None = None
    max_interval: str | None = None


class _PerRetry(msgspec.Struct, frozen=True, rename="camel"):
    timeout: str | None = None
    back_off: _BackOff | None = None


class _RetryOn(msgspec.Struct, frozen=True, rename="camel"):
    triggers: tuple[str, ...] = ()
    http_status_codes: tuple[int, ...] = ()


class _Retry(msgspec.Struct, frozen=True, rename="camel"):
    num_retries: int = 2
    retry_on: _RetryOn | None = None
    per_retry: _PerRetry | None = None


class _HTTPTimeout(msgspec.Struct, frozen=True, rename="camel"):
    request_timeout: str | None = None


class _Timeout(msgspec.Struct, frozen=True):
    http: _HTTPTimeout | None = None


# Envoy Gateway's retry without retryOn: connection failures, and 503.
_DEFAULT_TRIGGERS: tuple[str, ...] = (
    "connect-failure",
    "refused-stream",
    "unavailable",
    "cancelled",
    "retriable-status-codes",
)
_DEFAULT_CODES: tuple[int, ...] = (503,)
# Envoy's own default base interval, when only maxInterval is given.
_DEFAULT_BASE_S = 0.025


def _ir_retry(retry: _Retry, out: list[str], at: str) -> ir.Retry:
    """The retry of ``retry`` (a policy's, or a SecurityPolicy's ``backendSettings.retry``, at
    ``at``); problems go to ``out``."""
    on = retry.retry_on
    if on is None or not (on.triggers or on.http_status_codes):
        triggers, codes = _DEFAULT_TRIGGERS, _DEFAULT_CODES
    else:
        triggers, codes = on.triggers, on.http_status_codes
        if codes and "retriable-status-codes" not in triggers:
            triggers = (*triggers, "retriable-status-codes")
    for code in codes:
        if not 100 <= code <= 599:
            out.append(f"{at}.retryOn.httpStatusCodes: {code} is not an HTTP status code")
    if not 0 <= retry.num_retries < 1 << 32:
        out.append(f"{at}.numRetries {retry.num_retries} is out of range")
    per = retry.per_retry or _PerRetry()
    back = per.back_off or _BackOff()
    base = specvalue.seconds(back.base_interval, f"{at}.perRetry.backOff.baseInterval", out)
    ceiling = specvalue.seconds(back.max_interval, f"{at}.perRetry.backOff.maxInterval", out)
    if ceiling is not None and base is None:
        base = _DEFAULT_BASE_S
    if base is not None and base <= 0:
        out.append(f"{at}.perRetry.backOff.baseInterval must be more than 0")
    if base is not None and ceiling is not None and ceiling < base:
        out.append(f"{at}.perRetry.backOff.maxInterval must not be less than baseInterval")
    per_try = specvalue.seconds(per.timeout, f"{at}.perRetry.timeout", out)
    return ir.Retry(
        codes=tuple(codes),
        attempts=retry.num_retries,
        backoff_s=base,
        triggers=tuple(triggers),
        max_backoff_s=ceiling,
        per_try_s=per_try,
    )


def _request_timeout(timeout: _Timeout, out: list[str], at: str) -> float | None:
    http = timeout.http or _HTTPTimeout()
    return specvalue.seconds(http.request_timeout, f"{at}.timeout.http.requestTimeout", out)


def settings(
    spec: dict[str, Any], out: list[str], at: str = "spec"
) -> tuple[ir.Retry | None, float | None]:
    """The retry and request timeout of ``spec`` (a policy's spec, or a SecurityPolicy's
    ``backendSettings``, at ``at``); None: unset. Problems go to ``out``."""
    retry = specvalue.field(spec, "retry", _Retry, at)
    timeout = specvalue.field(spec, "timeout", _Timeout, at)
    out.extend(f for f in (retry, timeout) if isinstance(f, str))
    return (
        _ir_retry(retry, out, f"{at}.retry") if isinstance(retry, _Retry) else None,
        _request_timeout(timeout, out, at) if isinstance(timeout, _Timeout) else None,
    )


def problems(spec: dict[str, Any]) -> list[str]:
    """What in ``retry`` and ``timeout.http`` cannot be applied (beyond the CRD's own rules)."""
    out: list[str] = []
    settings(spec, out)
    return out


def route_effect(spec: dict[str, Any], route: ir.Route) -> ir.Route:
    retry, request = settings(spec, [])
    if retry is not None:
        route = msgspec.structs.replace(route, retry=retry)
    if request is not None:
        route = msgspec.structs.replace(route, timeout_s=request)
    return route

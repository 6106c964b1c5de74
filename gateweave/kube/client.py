"""A generic, dict-based Kubernetes API client on top of kubernetes_asyncio.

kubernetes_asyncio does the configuration (kubeconfig files, in-cluster service account,
token refresh, TLS) and the HTTP transport (its aiohttp-based ``ApiClient``); this module
adds the few generic calls gateweave needs, on raw JSON objects of any kind:
get/list/create/update/patch/delete on any path, and a watch stream of decoded events.

Its own watch loop is used instead of ``kubernetes_asyncio.watch.Watch`` because that one
retries a 410 Gone with the same (expired) resourceVersion and deserializes into typed
models; the provider needs the raw objects and to re-list on 410.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec
from kubernetes_asyncio import client as kclient
from kubernetes_asyncio import config as kconfig
from kubernetes_asyncio.client.exceptions import ApiException

JSON = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class KubeError(Exception):
    """A request the API server answered with an error status (``code``: HTTP status)."""

    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}" if reason else f"{code}: {message}")
        self.code, self.reason, self.message = code, reason, message


class Gone(KubeError):
    """410 Gone: the resourceVersion is too old; list again."""


def _error(code: int, body: str) -> KubeError:
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        data = {}
    message = str(data.get("message") or body or "")[:500] if isinstance(data, dict) else body[:500]
    reason = str(data.get("reason") or "") if isinstance(data, dict) else ""
    cls = Gone if code == 410 else KubeError
    return cls(code, message, reason)


@dataclass(frozen=True)
class ResourcePath:
    """Where a kind lives: group, version, plural, whether namespaced."""

    group: str
    version: str
    plural: str
    namespaced: bool

    def collection(self, namespace: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{base}/{self.plural}"

    def item(self, namespace: str, name: str, subresource: str = "") -> str:
        path = f"{self.collection(namespace)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class KubeClient:
    """Generic calls over one kubernetes_asyncio ``ApiClient``."""

    def __init__(self, api_client: kclient.ApiClient) -> None:
        self.api = api_client

    @classmethod
    async def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None
    ) -> KubeClient:
        configuration = kclient.Configuration()
        await kconfig.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
        return cls(kclient.ApiClient(configuration))

    @classmethod
    def in_cluster(cls) -> KubeClient:
        configuration = kclient.Configuration()
        kconfig.load_incluster_config(client_configuration=configuration)
        return cls(kclient.ApiClient(configuration))

    @classmethod
    async def load(cls, kubeconfig: str | None) -> KubeClient:
        """``kubeconfig`` if given; else in-cluster config when running in a pod; else the
        default kubeconfig ($KUBECONFIG or ~/.kube/config)."""
        if kubeconfig:
            return await cls.from_kubeconfig(kubeconfig)
        try:
            return cls.in_cluster()
        except kconfig.ConfigException:
            return await cls.from_kubeconfig(None)

    async def close(self) -> None:
        await self.api.close()

    # ------------------------------------------------------------ requests

    async def _call(
        self, method: str, path: str, query: dict[str, Any], headers: dict[str, str], **options: Any
    ) -> Any:
        """The generated client's ``call_api`` with the bearer token; its errors as
        :class:`KubeError` (``options``: call_api's own, e.g. ``_preload_content``)."""
        try:
            return await self.api.call_api(
                path,
                method,
                query_params=list(query.items()),
                header_params=headers,
                auth_settings=["BearerToken"],
                **options,
            )
        except ApiException as exc:
            raise _error(
                int(exc.status or 0), exc.body if isinstance(exc.body, str) else ""
            ) from None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
    ) -> JSON:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        data = await self._call(
            method,
            path,
            query or {},
            headers,
            body=body,
            response_types_map={200: "object", 201: "object"},
            _return_http_data_only=True,
            _preload_content=True,
            _request_timeout=timeout,
        )
        return data if isinstance(data, dict) else {}

    async def get(self, path: str) -> JSON:
        return await self.request("GET", path)

    async def _get_page(self, path: str, query: dict[str, Any], timeout: float = 30.0) -> JSON:
        """GET one page of a list, its body decoded by msgspec (not the generated client's
        ``json.loads`` of the body first decoded to a ``str``: at thousands of objects a
        page, that costs about twice as much)."""
        headers = {"Accept": "application/json"}
        resp = await self._call(
            "GET", path, query, headers, _preload_content=False, _request_timeout=timeout
        )
        try:
            body = await resp.read()
        finally:
            resp.release()
        if not 200 <= resp.status < 300:
            raise _error(resp.status, body.decode("utf-8", "replace"))
        page = msgspec.json.decode(body)  # msgspec.DecodeError is a ValueError, as json's
        return page if isinstance(page, dict) else {}

    async def pages(
        self, path: str, *, limit: int = 500, label_selector: str = ""
    ) -> AsyncGenerator[tuple[list[JSON], str], None]:
        """The items of each page of a list (following ``continue``; those ``label_selector``
        selects, if given), with the list's resourceVersion (the last page's counts). The next
        page is requested before a page is handed over, so the API server prepares it while
        the caller works on this one (the caller must then yield to the loop for it to
        progress). Close the iterator (``contextlib.aclosing``) if stopping early: that
        cancels the request in flight."""
        selector = {"labelSelector": label_selector} if label_selector else {}
        query: dict[str, Any] = {"limit": limit, **selector}
        fetch = asyncio.ensure_future(self._get_page(path, query))
        try:
            for _ in range(100_000):
                page = await fetch
                items = [i for i in page.get("items") or [] if isinstance(i, dict)]
                meta = page.get("metadata") or {}
                if not meta.get("continue"):
                    yield items, str(meta.get("resourceVersion") or "")
                    return
                query = {"limit": limit, "continue": meta["continue"], **selector}
                fetch = asyncio.ensure_future(self._get_page(path, query))
                yield items, str(meta.get("resourceVersion") or "")
            raise KubeError(0, "list did not end")
        finally:
            fetch.cancel()  # (a page fetched but not handed over: its result or error dropped)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await fetch

    async def list(
        self, path: str, *, limit: int = 500, label_selector: str = ""
    ) -> tuple[list[JSON], str]:
        """Every item (following ``continue``; those ``label_selector`` selects, if given) and
        the list's resourceVersion."""
        items: list[JSON] = []
        version = ""
        async with contextlib.aclosing(
            self.pages(path, limit=limit, label_selector=label_selector)
        ) as pages:
            async for page, rv in pages:
                items.extend(page)
                version = rv
        return items, version

    async def create(self, path: str, body: JSON) -> JSON:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: JSON) -> JSON:
        return await self.request("PUT", path, body=body)

    async def patch(
        self,
        path: str,
        body: Any,
        content_type: str = MERGE_PATCH,
        *,
        field_manager: str = "",
        force: bool = False,
    ) -> JSON:
        query: dict[str, Any] = {}
        if field_manager:
            query["fieldManager"] = field_manager
        if force:
            query["force"] = "true"
        return await self.request("PATCH", path, query=query, body=body, content_type=content_type)

    async def delete(self, path: str) -> JSON:
        return await self.request("DELETE", path)

    async def watch(
        self,
        path: str,
        resource_version: str,
        *,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
        label_selector: str = "",
    ) -> AsyncIterator[JSON]:
        """The events of one watch request (of the objects ``label_selector`` selects, if
        given), decoded, until the server ends it.

        An ERROR event with code 410 (or an HTTP 410) raises :class:`Gone`; another ERROR
        event raises :class:`KubeError`.
        """
        query: dict[str, Any] = {"watch": "1", "timeoutSeconds": timeout_seconds}
        if resource_version:
            query["resourceVersion"] = resource_version
        if bookmarks:
            query["allowWatchBookmarks"] = "true"
        if label_selector:
            query["labelSelector"] = label_selector
        headers = {"Accept": "application/json"}
        resp = await self._call(
            "GET",
            path,
            query,
            headers,
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=timeout_seconds + 30),
        )
        try:
            if not 200 <= resp.status < 300:
                raise _error(resp.status, (await resp.read()).decode("utf-8", "replace"))
            async for line in resp.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if not isinstance(event, dict):
                    continue
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    raise _error(int(obj.get("code") or 500), json.dumps(obj))
                yield event
        finally:
            resp.release()

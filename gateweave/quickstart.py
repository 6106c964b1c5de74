"""``gateweave quickstart``: the demo backend, ``serve`` with a real Envoy, and a curl that proves
it.
"""

from __future__ import annotations

import asyncio
import shlex
from typing import Any

import httpx

from gateweave.app import App


def curl_targets(
    items: list[dict[str, Any]], controller_name: str
) -> list[tuple[str, str, int, str]]:
    """(host header, address, port, path) for every accepted HTTPRoute parent on a programmed
    Gateway.
    """
    gateways = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in items
        if o.get("kind") == "Gateway" and o.get("status")
    }
    out: list[tuple[str, str, int, str]] = []
    for route in items:
        if route.get("kind") != "HTTPRoute":
            continue
        ns = route["metadata"]["namespace"]
        for entry in route.get("status", {}).get("parents", []):
            accepted = any(
                c["type"] == "Accepted" and c["status"] == "True"
                for c in entry.get("conditions", [])
            )
            ref = entry.get("parentRef", {})
            gw = gateways.get((ref.get("namespace") or ns, ref.get("name")))
            if entry.get("controllerName") != controller_name or not accepted or gw is None:
                continue
            st = gw["status"]
            if not any(
                c["type"] == "Programmed" and c["status"] == "True"
                for c in st.get("conditions", [])
            ):
                continue
            addresses = [a["value"] for a in st.get("addresses", [])]
            for lst in gw["spec"].get("listeners", []):
                if lst.get("protocol") != "HTTP" or (
                    ref.get("sectionName") and ref["sectionName"] != lst["name"]
                ):
                    continue
                hosts = route["spec"].get("hostnames") or [lst.get("hostname") or "example.com"]
                host = hosts[0].replace("*", "www")
                for address in addresses:
                    out.append((host, address, int(lst["port"]), "/"))
    return out


def curl_command(host: str, address: str, port: int, path: str) -> str:
    return f"curl -sS --resolve {shlex.quote(f'{host}:{port}:{address}')} {shlex.quote(f'http://{host}:{port}{path}')}"


async def prove(app: App, timeout: float) -> tuple[str, int, str]:
    """Wait until a route answers through Envoy; (curl command, status, body) of the first that
    does.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = "no HTTPRoute is accepted on a programmed Gateway yet"
    async with httpx.AsyncClient(timeout=2.0) as client:
        while loop.time() < deadline:
            try:
                items = (
                    await client.get(f"{app.admin.url}/api/objects", headers=app.admin.headers)
                ).json()["items"]
                for host, address, port, path in curl_targets(items, app.settings.controller_name):
                    resp = await client.get(
                        f"http://{address}:{port}{path}", headers={"Host": host}
                    )
                    last = f"{curl_command(host, address, port, path)} answered {resp.status_code}"
                    if resp.status_code == 200:
                        return curl_command(host, address, port, path), resp.status_code, resp.text
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.2)
    raise TimeoutError(f"no route answered 200 through Envoy within {timeout:.0f} s ({last})")

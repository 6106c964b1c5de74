// gateweave dashboard: draws /api/graph as SVG, lists /api/errors, shows each route's traffic
// (/api/traffic/stream, else polling /api/traffic) and, on a click, the object, its conditions
// and explain's account. Text from the server is only ever set as textContent.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;
const COLUMN_TITLES = ["classes", "gateways", "listener sets", "listeners", "routes", "backends", "grants & policies"];

const state = {
  graph: null,      // the last /api/graph
  etag: "",
  byId: new Map(),  // node id -> node
  selected: "",     // id of the selected node
  traffic: null,    // the last /api/traffic object
};

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

function fmtRate(x) { return x >= 10 ? x.toFixed(0) : x.toFixed(2); }

// ---------------------------------------------------------------- graph

async function loadGraph() {
  try {
    const resp = await fetch("api/graph", { headers: state.etag ? { "If-None-Match": state.etag } : {} });
    if (resp.status === 200) {
      state.etag = resp.headers.get("ETag") || "";
      state.graph = await resp.json();
      for (const n of state.graph.nodes) {  // fields the server leaves out when empty
        for (const k of ["namespace", "sublabel", "why", "explain"]) n[k] = n[k] || "";
        for (const k of ["conditions", "errors"]) n[k] = n[k] || [];
        n.details = n.details || {};
      }
      for (const e of state.graph.edges) { e.label = e.label || ""; e.health = e.health || ""; }
      state.byId = new Map(state.graph.nodes.map((n) => [n.id, n]));
      render();
      if (state.selected) showDetails(state.selected);
    }
  } catch (err) {
    document.getElementById("summary").textContent = "admin API unreachable: " + err;
  }
  setTimeout(loadGraph, POLL_MS);
}

function edgePath(a, b, w, h) {
  // from a's right side to b's left side; backwards (a grant or policy to what it binds) the other way
  const forward = b.x >= a.x + w;
  const x1 = forward ? a.x + w : a.x, y1 = a.y + h / 2;
  const x2 = forward ? b.x : b.x + w, y2 = b.y + h / 2;
  const dx = Math.max(40, Math.abs(x2 - x1) / 2) * (forward ? 1 : -1);
  return { d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`, mx: (x1 + x2) / 2, my: (y1 + y2) / 2 };
}

function render() {
  const g = state.graph;
  const w = g.node_width, h = g.node_height;
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${g.width} ${g.height}`);
  svg.setAttribute("width", g.width);
  svg.setAttribute("height", g.height);

  const columnX = new Map();
  for (const n of g.nodes) columnX.set(n.column, Math.min(columnX.get(n.column) ?? Infinity, n.x));
  for (const [col, x] of columnX) svg.appendChild(el("svg:text", { x: x, y: 16, class: "column-title" }, COLUMN_TITLES[col] || ""));

  const edges = el("svg:g", { class: "edges" });
  for (const e of g.edges) {
    const a = state.byId.get(e.source), b = state.byId.get(e.target);
    if (!a || !b) continue;
    const p = edgePath(a, b, w, h);
    const path = el("svg:path", {
      d: p.d, class: `edge kind-${e.kind}` + (e.health ? ` health-${e.health}` : ""),
      "data-source": e.source, "data-target": e.target, "data-kind": e.kind,
    });
    path.appendChild(el("svg:title", {}, `${e.kind}${e.label ? ": " + e.label : ""}`));
    edges.appendChild(path);
    if (e.kind === "rejected" && e.label) edges.appendChild(el("svg:text", { x: p.mx, y: p.my - 3, class: "edge-label", "text-anchor": "middle" }, e.label));
  }
  svg.appendChild(edges);

  const nodes = el("svg:g", { class: "nodes" });
  for (const n of g.nodes) nodes.appendChild(drawNode(n, w, h));
  svg.appendChild(nodes);

  applyTraffic();
  applyFilter();
  summarize();
}

function drawNode(n, w, h) {
  const grp = el("svg:g", {
    class: `node health-${n.health} kind-${n.kind}` + (n.id === state.selected ? " selected" : ""),
    transform: `translate(${n.x},${n.y})`, "data-id": n.id, "data-kind": n.kind, "data-health": n.health, tabindex: "0",
  });
  grp.appendChild(el("svg:title", {}, `${n.kind} ${n.namespace ? n.namespace + "/" : ""}${n.name}` + (n.why ? `\n${n.why}` : "")));
  grp.appendChild(el("svg:rect", { width: w, height: h, rx: 6, ry: 6 }));
  grp.appendChild(el("svg:text", { x: 10, y: 18, class: "label" }, clip(n.label, 28)));
  grp.appendChild(el("svg:text", { x: 10, y: 34, class: "sub" }, clip(n.sublabel || n.kind, 32)));
  grp.appendChild(el("svg:text", { x: 10, y: 50, class: "line3" }, clip(n.why, 33)));
  if (n.errors && n.errors.length) {
    grp.appendChild(el("svg:circle", { cx: w - 10, cy: 10, r: 8, class: "badge" }));
    grp.appendChild(el("svg:text", { x: w - 10, y: 14, class: "badge-text", "text-anchor": "middle" }, "!"));
  }
  grp.addEventListener("click", () => showDetails(n.id));
  grp.addEventListener("keydown", (ev) => { if (ev.key === "Enter") showDetails(n.id); });
  return grp;
}

function summarize() {
  const g = state.graph;
  const count = (pred) => g.nodes.filter(pred).length;
  const routes = count((n) => n.column === 4);
  const parts = [
    `${count((n) => n.kind === "Gateway")} Gateways`,
    `${count((n) => n.kind === "Listener")} listeners`,
    `${routes} routes`,
    `${count((n) => n.health === "fail")} failing`,
    `${count((n) => n.health === "warn")} degraded`,
  ];
  document.getElementById("summary").textContent = parts.join(" · ");
}

function applyFilter() {
  const q = document.getElementById("filter").value.trim().toLowerCase();
  const hit = new Set();
  for (const n of state.graph ? state.graph.nodes : []) {
    if (!q || n.id.toLowerCase().includes(q)) hit.add(n.id);
  }
  for (const g of document.querySelectorAll("#graph .node")) g.classList.toggle("dim", !hit.has(g.dataset.id));
  for (const p of document.querySelectorAll("#graph .edge")) {
    p.classList.toggle("dim", q !== "" && !(hit.has(p.dataset.source) && hit.has(p.dataset.target)));
  }
}

// ---------------------------------------------------------------- details

function table(headers, rows, badRow) {
  const t = el("table");
  const head = el("tr");
  for (const hd of headers) head.appendChild(el("th", {}, hd));
  t.appendChild(el("thead")).appendChild(head);
  const body = t.appendChild(el("tbody"));
  for (const r of rows) {
    const tr = body.appendChild(el("tr", badRow && badRow(r) ? { class: "bad" } : {}));
    for (const cell of r) tr.appendChild(el("td", {}, String(cell)));
  }
  return t;
}

function isBad(c) { return c.status === (c.type === "Conflicted" ? "True" : "False"); }

function showDetails(id) {
  const n = state.byId.get(id);
  if (!n) return;
  state.selected = id;
  for (const g of document.querySelectorAll("#graph .node")) g.classList.toggle("selected", g.dataset.id === id);
  const panel = document.getElementById("details");
  panel.replaceChildren(el("h2", {}, `${n.kind} ${n.namespace ? n.namespace + "/" : ""}${n.name}`));
  panel.appendChild(el("p", { class: "kindline" }, `${n.sublabel} · ${({ ok: "healthy", warn: "degraded", fail: "failing", none: "not judged by gateweave" })[n.health]}`));
  if (n.why) panel.appendChild(el("p", { class: "why" }, n.why));
  if (n.conditions && n.conditions.length) {
    panel.appendChild(el("h2", {}, "Conditions"));
    panel.appendChild(table(["about", "condition", "reason", "message"],
      n.conditions.map((c) => [c.scope || "", `${c.type}=${c.status}`, c.reason || "", c.message || ""]),
      (r) => isBad({ type: r[1].split("=")[0], status: r[1].split("=")[1] })));
  }
  if (n.errors && n.errors.length) {
    panel.appendChild(el("h2", {}, "Configuration errors"));
    const ol = panel.appendChild(el("ol"));
    for (const e of n.errors) ol.appendChild(el("li", {}, `${e.source}: ${e.message}`));
  }
  panel.appendChild(el("div", { id: "details-traffic" }));
  detailsTraffic();
  if (n.details && Object.keys(n.details).length) {
    panel.appendChild(el("h2", {}, "Details"));
    panel.appendChild(el("pre", {}, JSON.stringify(n.details, null, 2)));
  }
  if (n.explain) {
    panel.appendChild(el("h2", {}, "Explain"));
    loadExplain(n, panel.appendChild(el("pre", { class: "explain" }, "…")));
  }
  if (n.kind !== "Listener") {
    const box = el("details", { class: "object" });
    box.appendChild(el("summary", {}, "Object (with status)"));
    loadObject(n, panel, box);
  }
}

async function loadObject(n, panel, box) {
  const q = new URLSearchParams({ kind: n.kind, namespace: n.namespace, name: n.name });
  try {
    const resp = await fetch("api/object?" + q);
    if (!resp.ok || state.selected !== n.id) return;  // not an object of ours (a missing Service), or another click
    box.appendChild(el("pre", {}, JSON.stringify(await resp.json(), null, 2)));
    const shown = panel.querySelector("details.object");
    if (shown) shown.replaceWith(box); else panel.appendChild(box);
  } catch (err) { /* the graph poll reports an unreachable server */ }
}

function detailsTraffic() {
  const box = document.getElementById("details-traffic");
  const n = state.byId.get(state.selected);
  const t = box && n && trafficOf(n);
  if (!t) return;
  box.replaceChildren(el("h2", {}, "Traffic"));
  box.appendChild(table(["requests", "req/s", "errors", "err/s"], [[t.requests, fmtRate(t.rate), t.errors, fmtRate(t.error_rate)]]));
}

async function loadExplain(n, pre) {
  try {
    const resp = await fetch(n.explain);
    const body = await resp.json();
    pre.textContent = (body.lines || []).join("\n");
  } catch (err) {
    pre.textContent = "explain failed: " + err;
  }
}

// ---------------------------------------------------------------- errors

async function loadErrors() {
  try {
    const resp = await fetch("api/errors");
    const items = (await resp.json()).items || [];
    document.getElementById("error-count").textContent = items.length ? `(${items.length})` : "";
    const list = document.getElementById("error-list");
    list.replaceChildren();
    list.classList.toggle("empty", !items.length);
    for (const e of items) {
      const li = list.appendChild(el("li", { "data-source": e.source || "" }));
      li.appendChild(el("span", { class: "source" }, e.source || "(no file)"));
      if (e.kind) li.appendChild(document.createTextNode(` ${e.kind} ${e.namespace ? e.namespace + "/" : ""}${e.name || ""}`));
      li.appendChild(el("div", {}, e.message));
    }
  } catch (err) { /* the graph poll reports an unreachable server */ }
  setTimeout(loadErrors, POLL_MS);
}

// ---------------------------------------------------------------- traffic

function trafficOf(n) {
  const t = state.traffic;
  if (!t) return null;
  if (n.column === 4) return (t.routes || {})[n.id] || null;
  if (n.kind === "Gateway") return (t.gateways || {})[`${n.namespace}/${n.name}`] || null;
  return null;
}

function applyTraffic() {
  const t = state.traffic;
  const live = document.getElementById("live");
  if (t) {
    live.textContent = `traffic: live (rates over ${t.window_s} s) · ${new Date().toLocaleTimeString()}`;
    live.classList.add("on");
  }
  for (const g of document.querySelectorAll("#graph .node")) {
    const n = state.byId.get(g.dataset.id);
    const r = n && trafficOf(n);
    if (!r) continue;
    g.dataset.requests = r.requests;
    g.dataset.errors = r.errors;
    if (n.health === "ok" || n.health === "warn" || n.kind === "Gateway") {
      g.querySelector("text.line3").textContent = `${r.requests} req · ${fmtRate(r.rate)}/s · ${r.errors} err`;
    }
  }
  const body = document.querySelector("#traffic-table tbody");
  body.replaceChildren();
  const rows = Object.entries((t && t.routes) || {}).sort((a, b) => b[1].rate - a[1].rate || a[0].localeCompare(b[0]));
  for (const [id, r] of rows) {
    const tr = body.appendChild(el("tr", { "data-route": id }));
    tr.appendChild(el("td", {}, id));
    for (const v of [r.requests, fmtRate(r.rate), r.errors, fmtRate(r.error_rate)]) tr.appendChild(el("td", { class: "num" }, String(v)));
  }
  detailsTraffic();
}

function onTraffic(obj) {
  state.traffic = obj;
  if (state.graph) applyTraffic();
}

function followTraffic() {
  if (!window.EventSource) { pollTraffic(); return; }
  const source = new EventSource("api/traffic/stream");
  let got = false;
  source.onmessage = (ev) => { got = true; onTraffic(JSON.parse(ev.data)); };
  source.onerror = () => {
    if (!got) { source.close(); pollTraffic(); }  // no stream here: poll instead
  };
}

async function pollTraffic() {
  let wait = POLL_MS;
  try {
    const resp = await fetch("api/traffic");
    if (resp.ok) onTraffic(await resp.json());
    else {
      document.getElementById("live").textContent = "traffic: not available from this server";
      wait = 5 * POLL_MS;
    }
  } catch (err) { wait = 5 * POLL_MS; }
  setTimeout(pollTraffic, wait);
}

// ---------------------------------------------------------------- start

document.getElementById("filter").addEventListener("input", applyFilter);
document.getElementById("fit").addEventListener("click", (ev) => {
  const on = document.getElementById("canvas").classList.toggle("fit");
  ev.currentTarget.setAttribute("aria-pressed", String(on));
});
loadGraph();
loadErrors();
followTraffic();

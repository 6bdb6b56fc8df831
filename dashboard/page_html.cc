// The dashboard page (page.h). All text from the cluster is inserted as text nodes, never as HTML.
#include "dashboard/page.h"

namespace troupe::dashboard {

const char* dashboard_page() {
  return R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>troupe dashboard</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f5f6f8; }
  header { background: #1d2330; color: #fff; padding: 10px 20px; display: flex; gap: 24px; align-items: baseline; }
  header h1 { font-size: 18px; margin: 0; }
  #live { font-size: 12px; }
  #live.ok::before { content: "\25CF "; color: #3ccf6e; }
  #live.bad::before { content: "\25CF "; color: #e5484d; }
  main { padding: 12px 20px; }
  section { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; margin-bottom: 14px; padding: 10px 14px; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eef0f3; white-space: nowrap; }
  th { font-weight: 600; color: #5b6472; font-size: 12px; }
  td.msg { white-space: normal; }
  .mono { font-family: ui-monospace, monospace; font-size: 12px; }
  .state { font-weight: 600; border-radius: 3px; padding: 1px 6px; }
  .ALIVE, .RUNNING, .SUCCEEDED { background: #d9f5e3; color: #126b33; }
  .SUSPECT, .PENDING, .RESTARTING { background: #fdf0cf; color: #8a5a00; }
  .DEAD, .FAILED { background: #fbd9da; color: #b4161b; }
  .CANCELLED { background: #e6e8ec; color: #4b5260; }
  tr.dead td { background: #fff3f3; }
  .bar { width: 120px; height: 8px; background: #eef0f3; border-radius: 4px; display: inline-block; vertical-align: middle; }
  .bar > div { height: 8px; background: #3b82f6; border-radius: 4px; }
  #summary span { margin-right: 18px; }
  #error { color: #b4161b; }
  input { font: inherit; padding: 2px 6px; }
  .note { color: #5b6472; font-size: 12px; }
</style>
</head>
<body>
<header><h1>troupe</h1><span id="summary"></span><span id="live" class="bad">connecting</span></header>
<main>
<div id="error"></div>
<section><h2>Nodes</h2><table><thead><tr><th>ID</th><th>State</th><th>Address</th><th>Host</th><th>CPUs</th>
<th>GPUs</th><th>Memory GiB</th><th>Heartbeat</th><th></th></tr></thead><tbody id="nodes"></tbody></table></section>
<section><h2>Jobs</h2><table><thead><tr><th>ID</th><th>Name</th><th>Strategy</th><th>State</th><th>Workers</th>
<th>Epoch</th><th>Progress</th><th>Loss</th><th>Samples/s</th><th>Accuracy</th><th>ETA</th><th>Message</th></tr></thead>
<tbody id="jobs"></tbody></table></section>
<section><h2>Actors</h2><div id="actor-counts"></div>
<p><input id="actor-q" placeholder="search actors (id, type, name, node, reason)" size="44">
<span class="note" id="actor-note"></span></p>
<table><thead><tr><th>ID</th><th>Type</th><th>Name</th><th>Node</th><th>State</th><th>Restarts</th><th>Reason</th></tr></thead>
<tbody id="actors"></tbody></table></section>
<section><h2>Recent events</h2><table><thead><tr><th>Time</th><th>Kind</th><th>Subject</th><th>Message</th></tr></thead>
<tbody id="events"></tbody></table></section>
<p class="note">Live from <span class="mono">/api/stream</span>; the JSON API is described in docs/dashboard.md.
Charts of loss, accuracy and samples/s per worker come in the next part of issue 7.</p>
</main>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token");
function api(path) {
  if (!token) return path;
  return path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token);
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells, cls) {
  const tr = el("tr", null, cls);
  for (const c of cells) tr.appendChild(c instanceof Node ? wrap(c) : el("td", c));
  return tr;
}
function wrap(node) { const td = el("td"); td.appendChild(node); return td; }
function state(s) { return el("span", s, "state " + s); }
function fill(id, rows) { const body = document.getElementById(id); body.replaceChildren(...rows); }
function num(v, digits) { return Number(v).toFixed(digits); }
function gib(b) { return (b / 1073741824).toFixed(1); }
function used(r, key, f) { return f(r.used[key]) + "/" + f(r.total[key]); }
function age(ms) { return ms < 0 ? "never" : (ms / 1000).toFixed(1) + " s ago"; }
function clock(ms) { const d = new Date(ms); return d.toLocaleTimeString() + "." + String(d.getMilliseconds()).padStart(3, "0"); }
function short(id) { return id ? id.slice(0, 8) : ""; }
function eta(s) {
  if (!(s > 0)) return "";
  const m = Math.floor(s / 60);
  return m > 0 ? m + " min " + Math.round(s % 60) + " s" : Math.round(s) + " s";
}
function progress(p) {
  const bar = el("span", null, "bar"), inner = el("div");
  inner.style.width = Math.max(0, Math.min(100, 100 * p)).toFixed(1) + "%";
  bar.appendChild(inner);
  const span = el("span");
  span.appendChild(bar);
  span.appendChild(document.createTextNode(" " + (100 * p).toFixed(1) + "%"));
  return span;
}

function render(view) {
  document.getElementById("error").textContent = "";
  const s = view.summary;
  const by = Object.entries(s.nodes_by_state).map(([k, v]) => v + " " + k).join(", ");
  const summary = document.getElementById("summary");
  summary.replaceChildren(el("span", s.nodes + " nodes (" + by + ")"), el("span", s.actors + " actors"),
                          el("span", s.jobs + " jobs"));
  fill("nodes", view.nodes.map(n => row([
    el("span", short(n.id), "mono"), state(n.state), n.address, n.hostname,
    used(n.resources, "cpus", v => num(v, v % 1 ? 1 : 0)), used(n.resources, "gpus", v => num(v, 0)),
    used(n.resources, "memory_bytes", gib), age(n.heartbeat_age_ms),
    (n.is_head ? "head " : "") + (n.death_reason || "")], n.state === "DEAD" ? "dead" : "")));
  fill("jobs", view.jobs.slice().sort((a, b) => b.submitted_ms - a.submitted_ms).map(j => row([
    el("span", short(j.id), "mono"), j.name, j.strategy, state(j.state), j.workers,
    j.epochs ? j.epoch + "/" + j.epochs : "", progress(j.progress), j.loss ? num(j.loss, 4) : "",
    j.samples_per_second ? num(j.samples_per_second, 0) : "", j.test_accuracy >= 0 ? num(j.test_accuracy, 4) : "",
    j.state === "RUNNING" ? eta(j.eta_seconds) : "", el("span", j.message)])));
  const counts = Object.entries(s.actors_by_state).map(([k, v]) => v + " " + k);
  document.getElementById("actor-counts").textContent = counts.length ? counts.join(", ") : "no actors";
  fill("events", view.events.slice().reverse().map(e => row([
    clock(e.time_ms), e.kind, el("span", short(e.subject), "mono"), e.message])));
  if (!searching) searchActors();
}

// The actor table: /api/actors with the search text, 100 at most.
let searching = false, lastQuery = null, lastSearch = 0;
function searchActors(force) {
  const q = document.getElementById("actor-q").value.trim();
  if (!force && q === lastQuery && Date.now() - lastSearch < 3000) return;
  searching = true;
  lastQuery = q;
  lastSearch = Date.now();
  fetch(api("/api/actors?limit=100" + (q ? "&q=" + encodeURIComponent(q) : "")))
    .then(r => r.json())
    .then(r => {
      if (r.error) { document.getElementById("actor-note").textContent = r.error; return; }
      document.getElementById("actor-note").textContent =
        r.truncated ? "showing " + r.returned + " of " + r.total : r.total + " matching";
      fill("actors", r.actors.map(a => row([
        el("span", short(a.id), "mono"), a.type, a.name, el("span", short(a.node), "mono"), state(a.state),
        a.restarts, el("span", a.pending_reason || a.death_reason)])));
    })
    .catch(() => {})
    .finally(() => { searching = false; });
}
document.getElementById("actor-q").addEventListener("input", () => searchActors(true));

function setLive(ok, text) {
  const live = document.getElementById("live");
  live.className = ok ? "ok" : "bad";
  live.textContent = text;
}
function showError(text) { document.getElementById("error").textContent = text; }

// Live updates: the event stream, or polling when it is not available.
let pollTimer = null;
function poll() {
  fetch(api("/api/cluster"))
    .then(r => r.json())
    .then(v => { if (v.error) { showError(v.error); setLive(false, "error"); } else { render(v); setLive(true, "polling, " + new Date().toLocaleTimeString()); } })
    .catch(() => setLive(false, "head unreachable"));
}
function startPolling() {
  if (pollTimer) return;
  poll();
  pollTimer = setInterval(poll, 1000);
}
function startStream() {
  if (!window.EventSource) return startPolling();
  const es = new EventSource(api("/api/stream"));
  let failures = 0;
  es.addEventListener("cluster", m => {
    failures = 0;
    render(JSON.parse(m.data));
    setLive(true, "live, " + new Date().toLocaleTimeString());
  });
  es.addEventListener("error", m => {
    if (m.data) { const e = JSON.parse(m.data); showError(e.error); setLive(false, "GCS error"); return; }
    // Closed for good (refused: too many streams) or failing again and again: poll instead.
    if (es.readyState === EventSource.CLOSED || ++failures >= 3) { es.close(); startPolling(); return; }
    setLive(false, "reconnecting");
  });
}
startStream();
</script>
</body>
</html>
)PAGE";
}

}  // namespace troupe::dashboard

// The page's script, part 1 (page.h): helpers, the view router, the overview and the live stream.
#include "dashboard/page.h"

namespace troupe::dashboard::page_parts {

const char* const kCoreJs = R"JS(
const token = new URLSearchParams(location.search).get("token");
function api(path) {
  if (!token) return path;
  return path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token);
}
function getJson(path) {
  return fetch(api(path)).then(r => r.json().then(body => {
    if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
    return body;
  }));
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function $(id) { return document.getElementById(id); }
function row(cells, cls) {
  const tr = el("tr", null, cls);
  for (const c of cells) tr.appendChild(c instanceof Node ? wrap(c) : el("td", c));
  return tr;
}
function wrap(node) { const td = el("td"); td.appendChild(node); return td; }
function state(s) { return el("span", s, "state " + s); }
// The actor's state as the GCS records it: FINISHED (grey) for one that ended without failing (its
// body returned, or it was stopped or shut down), DEAD (red) for a failure (a crash, a kill, its
// node lost) or one never placed — the same word the counts and `troupe status` use.
function actorState(a) { return state(a.state); }
function fill(id, rows) { $(id).replaceChildren(...rows); }
function num(v, digits) { return Number(v).toFixed(digits); }
function gib(b) { return (b / 1073741824).toFixed(1); }
function used(r, key, f) { return f(r.used[key]) + "/" + f(r.total[key]); }
function age(ms) { return ms < 0 ? "never" : (ms / 1000).toFixed(1) + " s ago"; }
function clock(ms) { const d = new Date(ms); return d.toLocaleTimeString() + "." + String(d.getMilliseconds()).padStart(3, "0"); }
function short(id) { return id ? id.slice(0, 8) : ""; }
// An actor's node and the devices it was given there: "3fa2c1d0 gpu 0", "3fa2c1d0 gpus 0,1".
function nodeAndGpus(a) {
  const g = a.gpu_ids || [];
  return short(a.node) + (g.length ? (g.length === 1 ? " gpu " : " gpus ") + g.join(",") : "");
}
function link(text, href, cls) { const a = el("a", text, cls); a.href = href; return a; }
function jobLink(id) { return link(short(id), "#/job/" + id, "mono"); }
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
function setLive(ok, text) { const live = $("live"); live.className = ok ? "ok" : "bad"; live.textContent = text; }
function showError(text) { $("error").textContent = text; }

// ---- the overview: the summary and events from the stream; nodes, jobs, actors a page at a time ----
let lastView = null;
function render(view) {
  lastView = view;
  showError("");
  const s = view.summary;
  const by = Object.entries(s.nodes_by_state).map(([k, v]) => v + " " + k).join(", ");
  $("summary").replaceChildren(el("span", s.nodes + " nodes (" + by + ")"), el("span", s.actors + " actors"),
                               el("span", s.jobs + " jobs"));
  const counts = Object.entries(s.actors_by_state).map(([k, v]) => v + " " + k);
  $("actor-counts").textContent = counts.length ? counts.join(", ") : "no actors";
  fill("events", view.events.slice().reverse().map(e => row([
    clock(e.time_ms), e.kind, el("span", short(e.subject), "mono"), e.message])));
  nodeTable.load(true);
  jobTable.load(true);
  actorTable.load();
  updateNodeChoices(view.nodes);
}
// Nodes and jobs follow every push of the stream (a node killed turns red at once); actors at most
// every 3 s, and at once when the filters or the search text change.
const nodeTable = pagedTable("nodes", "/api/nodes", 100, 0, () => new URLSearchParams(), r => r.nodes.map(n => row([
  el("span", short(n.id), "mono"), state(n.state), n.address, n.hostname,
  used(n.resources, "cpus", v => num(v, v % 1 ? 1 : 0)), used(n.resources, "gpus", v => num(v, 0)),
  used(n.resources, "memory_bytes", gib), age(n.heartbeat_age_ms),
  (n.is_head ? "head " : "") + (n.death_reason || "")], n.state === "DEAD" ? "dead" : "")));
const jobTable = pagedTable("jobs", "/api/jobs", 50, 0, () => new URLSearchParams(), r => r.jobs.map(j => row([
  jobLink(j.id), j.name, j.strategy, state(j.state), j.workers,
  j.epochs ? j.epoch + "/" + j.epochs : "", progress(j.progress), j.loss ? num(j.loss, 4) : "",
  j.samples_per_second ? num(j.samples_per_second, 0) : "", j.test_accuracy >= 0 ? num(j.test_accuracy, 4) : "",
  j.state === "RUNNING" ? eta(j.eta_seconds) : "", el("span", j.message)])));
// The actor table: /api/actors with the filters and search text, 100 a page.
function actorFilters() {
  const q = new URLSearchParams();
  const text = $("actor-q").value.trim(), st = $("actor-state").value;
  const node = $("actor-node").value.trim().toLowerCase(), type = $("actor-type").value.trim();
  if (text) q.set("q", text);
  if (st) q.set("state", st);
  if (node) q.set("node", node);
  if (type) q.set("type", type);
  return q;
}
const actorTable = pagedTable("actors", "/api/actors", 100, 3000, actorFilters, r => {
  $("actor-note").textContent = r.total + " matching";
  return r.actors.map(a => row([
    el("span", short(a.id), "mono"), a.type, a.name, a.job ? jobLink(a.job) : "",
    el("span", nodeAndGpus(a), "mono"), actorState(a), a.restarts, el("span", a.pending_reason || a.death_reason)]));
});
for (const id of ["actor-q", "actor-state", "actor-node", "actor-type"]) {
  $(id).addEventListener("input", () => actorTable.load(true));
}

// ---- live updates: the event stream, or polling when it is not available ----
// Without the actor entries (actors=0: the summary still counts them; the table reads its pages),
// so a push does not carry 10,000 actors to a page that shows 100.
let pollTimer = null;
function poll() {
  getJson("/api/cluster?actors=0")
    .then(v => { render(v); setLive(true, "polling, " + new Date().toLocaleTimeString()); })
    .catch(e => { showError(e.message); setLive(false, "head unreachable"); });
}
function startPolling() {
  if (pollTimer) return;
  poll();
  pollTimer = setInterval(poll, 1000);
}
function startStream() {
  if (!window.EventSource) return startPolling();
  const es = new EventSource(api("/api/stream?actors=0"));
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

// ---- the router: #/, #/job/<id>, #/searches, #/search/<id>, #/events, #/logs ----
let viewTimer = null;
function route() {
  const h = location.hash.replace(/^#/, "") || "/";
  let name = "overview", arg = null;
  if (h.startsWith("/job/")) { name = "job"; arg = h.slice(5); }
  else if (h.startsWith("/search/")) { name = "search"; arg = h.slice(8); }
  else if (h === "/searches") name = "searches";
  else if (h === "/events") name = "events";
  else if (h === "/logs") name = "logs";
  for (const v of ["overview", "job", "searches", "search", "events", "logs"]) {
    $("view-" + v).className = "view" + (v === name ? " on" : "");
    const nav = $("nav-" + v);
    if (nav) nav.className = v === name || (v === "searches" && name === "search") ? "on" : "";
  }
  if (viewTimer) { clearInterval(viewTimer); viewTimer = null; }
  const refresh = {job: () => refreshJob(arg), searches: refreshSearches, search: () => refreshSearch(arg),
                   events: refreshEvents, logs: refreshLogs}[name];
  if (refresh) {
    refresh();
    viewTimer = setInterval(refresh, name === "job" ? 1000 : 2000);
  }
}
window.addEventListener("hashchange", route);
)JS";

}  // namespace troupe::dashboard::page_parts

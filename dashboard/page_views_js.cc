// The page's script, part 3 (page.h): the job page, the events timeline and the logs view; each
// polls its endpoints while shown (the router in part 1 starts and stops it).
#include "dashboard/page.h"

namespace troupe::dashboard::page_parts {

const char* const kViewsJs = R"JS(
// ---- #/job/<id> ----
let jobBusy = false;
function metricSeries(metrics, id, name) {
  const key = "job/" + id + "/" + name;
  return metrics.filter(m => m.name === key).map((m, i) => [i + 1, m.value]);
}
function perWorkerRates(wk) {
  // Samples/s over groups of 10 consecutive steps (start of the first to the end of the last).
  const out = [];
  for (let i = 0; i + 1 < wk.steps.length; i += 10) {
    const part = wk.steps.slice(i, i + 10), first = part[0], last = part[part.length - 1];
    const us = stepEnd(last) - first.start_us, samples = part.reduce((a, s) => a + s.samples, 0);
    if (us > 0) out.push([last.step, samples * 1e6 / us]);
  }
  return out;
}
function refreshJob(id) {
  if (jobBusy) return;
  jobBusy = true;
  Promise.all([getJson("/api/jobs/" + id + "?metrics=2000"), getJson("/api/jobs/" + id + "/timeline?steps=400"),
               getJson("/api/events?limit=50&subject=" + id)])
    .then(([d, t, ev]) => { showError(""); renderJob(id, d, t, ev.events); })
    .catch(e => showError("job " + id + ": " + e.message))
    .finally(() => { jobBusy = false; });
}
function renderJob(id, d, t, events) {
  const j = d.job;
  $("job-id").textContent = id;
  $("job-state").replaceChildren(state(j.state));
  $("job-kv").replaceChildren(...[
    ["name", j.name], ["strategy", j.strategy], ["workers", j.workers + (j.ps ? " + " + j.ps + " servers" : "")],
    ["epoch", j.epochs ? j.epoch + "/" + j.epochs : ""], ["step", j.step + "/" + j.steps],
    ["loss", j.loss ? num(j.loss, 4) : ""], ["samples/s", j.samples_per_second ? num(j.samples_per_second, 0) : ""],
    ["test accuracy", j.test_accuracy >= 0 ? num(j.test_accuracy, 4) : ""],
    ["ETA", j.state === "RUNNING" ? eta(j.eta_seconds) : ""]].map(([k, v]) => el("span", k + ": " + v)));
  $("job-kv").appendChild(progress(j.progress));
  $("job-message").textContent = j.message || "";
  // Alerts: a stuck collective, a straggler, the group's failures.
  const alerts = [];
  const psJob = j.strategy === "async" || j.strategy === "central";  // pull and push, no all-reduce
  if (t.stuck) alerts.push(el("div", (psJob ? "Stuck pull: " : "Stuck collective: ") + t.stuck.message, "alert bad"));
  if (t.straggler) alerts.push(el("div", "Straggler: " + t.straggler.message, "alert warn"));
  for (const f of d.collective_group.failures.slice(-3)) alerts.push(el("div", clock(f.time_ms) + " " + f.message, "alert bad"));
  if (t.note) alerts.push(el("div", t.note, "note"));
  $("job-alerts").replaceChildren(...alerts);
  // Charts.
  lineChart($("chart-loss"), [{name: psJob ? "loss (worker 0's batches)" : "loss (all workers' batches)", points: t.loss_curve}],
            {x: "step", empty: j.strategy !== "pipeline" ? "no steps yet" : "per-step loss is not recorded for pipeline jobs"});
  lineChart($("chart-epochs"), [
    {name: "train loss", points: metricSeries(d.metrics, id, "train_loss")},
    {name: "train acc", points: metricSeries(d.metrics, id, "train_accuracy"), axis: "right", color: "#10b981"},
    {name: "test acc", points: metricSeries(d.metrics, id, "test_accuracy"), axis: "right", color: "#8b5cf6"}],
    {x: "epoch", right: true, empty: "no epoch finished yet"});
  lineChart($("chart-rate"), t.workers.map((w, k) => ({name: "worker " + w.rank, points: perWorkerRates(w),
                                                        color: palette[k % palette.length]})),
            {x: "step", zero: true, empty: "no steps yet"});
  const straggler = t.straggler ? t.straggler.rank : -1;
  stackedBars($("chart-split"), t.workers.filter(w => w.summary.steps).map(w => ({
    label: "worker " + w.rank, bad: w.rank === straggler, parts: [
      {name: "data wait", value: w.summary.mean_data_ms, color: phaseColors.data_us},
      {name: "fwd/bwd", value: w.summary.mean_compute_ms, color: phaseColors.compute_us},
      {name: phaseName(t, "optimizer_us"), value: w.summary.mean_optimizer_ms, color: phaseColors.optimizer_us},
      {name: phaseName(t, "comm_us"), value: w.summary.mean_comm_ms, color: phaseColors.comm_us}]})), "ms");
  timelineChart($("chart-timeline"), t.workers, straggler, t.phases.map(p => p.key));
  $("th-comm").textContent = phaseName(t, "comm_us") + " ms";
  $("th-optimizer").textContent = phaseName(t, "optimizer_us") + " ms";
  $("timeline-legend").replaceChildren(...t.phases.map(p => el("span", p.name, "legend-" + p.key)));
  $("timeline-cmd").textContent = "troupe timeline " + short(id) + " > trace.json";
  $("timeline-link").href = api("/api/jobs/" + id + "/timeline?format=chrome&steps=5000");
  const ms = v => v === undefined ? "" : num(v, 2);
  fill("job-workers", t.workers.map(w => row([
    el("span", "worker " + w.rank + (w.rank === straggler ? " (straggler)" : ""), w.rank === straggler ? "state FAILED" : ""),
    w.live ? w.live.phase + (w.live.age_ms > 3000 ? " (silent " + (w.live.age_ms / 1000).toFixed(0) + " s)" : "") : "",
    w.summary.steps, ms(w.summary.mean_step_ms), ms(w.summary.mean_data_ms), ms(w.summary.mean_compute_ms),
    ms(w.summary.mean_comm_ms), ms(w.summary.mean_optimizer_ms), ms(w.summary.mean_comm_busy_ms),
    w.summary.samples_per_second ? num(w.summary.samples_per_second, 0) : ""])));
  // The collective group.
  const grp = d.collective_group.group;
  $("group-note").textContent = grp ? "group " + d.collective_group.name + ", generation " + grp.generation + ", " +
                                      grp.world_size + " ranks" : "no collective group recorded (sync jobs form one)";
  fill("group-members", grp ? grp.members.map(m => row([m.rank, el("span", short(m.node), "mono"),
                                                         el("span", short(m.actor), "mono"), m.address])) : []);
  fill("job-actors", d.actors.map(a => row([el("span", short(a.id), "mono"), a.type, el("span", short(a.node), "mono"),
                                            actorState(a), a.restarts, el("span", a.pending_reason || a.death_reason)])));
  const all = events.concat(d.collective_group.failures).sort((a, b) => b.time_ms - a.time_ms);
  fill("job-events", all.map(e => row([clock(e.time_ms), e.kind, e.message])));
}

// ---- #/events ----
const knownKinds = new Set(["node_joined", "node_suspect", "node_recovered", "node_died", "actor_started",
                            "actor_crashed", "actor_died", "actor_finished", "job_started", "job_succeeded", "job_failed",
                            "job_cancelled", "group_failed", "checkpoint_written", "checkpoint_corrupt"]);
function updateKinds(events) {
  for (const e of events) knownKinds.add(e.kind);
  const sel = $("ev-kind"), have = new Set([...sel.options].map(o => o.value));
  for (const k of [...knownKinds].sort()) if (!have.has(k)) { const o = el("option", k); o.value = k; sel.appendChild(o); }
}
function refreshEvents() {
  const q = new URLSearchParams({limit: "1000"});
  const kind = $("ev-kind").value, subject = $("ev-subject").value.trim().toLowerCase(), since = Number($("ev-since").value);
  if (kind) q.set("kind", kind);
  if (subject) q.set("subject", subject);
  if (since > 0) q.set("since", String(Date.now() - since * 1000));
  getJson("/api/events?" + q.toString())
    .then(r => {
      $("ev-note").textContent = r.returned + " events";
      updateKinds(r.events);
      eventStrip($("chart-events"), r.events);
      fill("ev-rows", r.events.slice().reverse().map(e => row([clock(e.time_ms), e.kind,
        e.subject.length === 32 ? el("span", short(e.subject), "mono") : e.subject, e.message],
        /died|failed|corrupt/.test(e.kind) ? "dead" : "")));
    })
    .catch(e => { $("ev-note").textContent = e.message; });
}
for (const id of ["ev-kind", "ev-subject", "ev-since"]) $(id).addEventListener("change", refreshEvents);

// ---- #/logs ----
function updateNodeChoices(nodes) {
  const sel = $("log-node"), have = new Set([...sel.options].map(o => o.value));
  for (const n of nodes) {
    if (have.has(n.id)) continue;
    const o = el("option", short(n.id) + " " + n.hostname + (n.is_head ? " (head)" : ""));
    o.value = n.id;
    sel.appendChild(o);
  }
}
let logBusy = false;
function refreshLogs(force) {
  if (logBusy || (force !== true && !$("log-follow").checked && $("log-out").childElementCount)) return;
  logBusy = true;
  const q = new URLSearchParams({lines: $("log-lines").value});
  const node = $("log-node").value, actor = $("log-actor").value.trim().toLowerCase(), job = $("log-job").value.trim().toLowerCase();
  if (node) q.set("node", node);
  if (actor) q.set("actor", actor);
  if (job) q.set("job", job);
  getJson("/api/logs?" + q.toString())
    .then(r => {
      const parts = [];
      for (const l of r.logs) {
        parts.push(el("h3", short(l.node) + " " + l.hostname + (l.is_head ? " (head)" : "") + " " + l.state + " — " + l.file +
                            (l.scanned_all ? "" : " (only the file's end is searched)")));
        parts.push(el("pre", l.lines.length ? l.lines.join("\n") : "(no matching lines)", "log"));
      }
      for (const u of r.unavailable) parts.push(el("div", short(u.node) + " " + u.hostname + ": " + u.reason, "note"));
      $("log-out").replaceChildren(...parts);
      $("log-note").textContent = (r.truncated ? "truncated to the newest lines; " : "") + new Date().toLocaleTimeString();
    })
    .catch(e => { $("log-note").textContent = e.message; })
    .finally(() => { logBusy = false; });
}
$("log-refresh").addEventListener("click", () => refreshLogs(true));
for (const id of ["log-node", "log-actor", "log-job", "log-lines"]) $(id).addEventListener("change", () => refreshLogs(true));

startStream();
route();
)JS";

}  // namespace troupe::dashboard::page_parts

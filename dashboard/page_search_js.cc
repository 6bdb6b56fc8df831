// The page's script, part 4 (page.h): the searches of `troupe tune` — the list (#/searches) and one
// search (#/search/<id>): its trials' table and their metric per epoch, the best trial highlighted
// and the trials stopped early ending in a cross. Both poll their endpoint while shown.
#include "dashboard/page.h"

namespace troupe::dashboard::page_parts {

const char* const kSearchJs = R"JS(
// ---- #/searches ----
const bestColor = "#111827";
function searchLink(id) { return link(short(id), "#/search/" + id, "mono"); }
function trialColor(index) { return palette[index % palette.length]; }
// "2 RUNNING, 1 SUCCEEDED, 1 CANCELLED (1 stopped early)"
function trialCounts(s) {
  const parts = Object.entries(s.trials_by_state).map(([k, v]) => v + " " + k);
  return s.trial_count + " trials" + (parts.length ? ": " + parts.join(", ") : "") +
         (s.stopped_early ? " (" + s.stopped_early + " stopped early)" : "");
}
// 100 a page; the list polls while shown (page_core_js.cc route) and follows the state filter.
const searchTable = pagedTable("searches", "/api/searches", 100, 0, () => {
  const q = new URLSearchParams();
  if ($("search-filter").value) q.set("state", $("search-filter").value);
  return q;
}, r => {
  $("search-note").textContent = r.total === 0 ? "no searches" + ($("search-filter").value ? " in this state" : " yet: troupe tune starts one")
                               : r.total + " searches";
  return r.searches.map(s => row([
    searchLink(s.id), s.name, state(s.state), s.scheduler, s.metric + " (" + s.mode + ")", trialCounts(s),
    s.best_so_far ? num(s.best_so_far.value, 4) + " (trial " + s.best_so_far.trial + (s.best_so_far.final ? ")" : ", so far)") : "",
    new Date(s.created_ms).toLocaleString(), el("span", s.message)]));
});
function refreshSearches() { searchTable.load(true); }
$("search-filter").addEventListener("change", refreshSearches);

// ---- #/search/<id> ----
let searchBusy = false;
function refreshSearch(id) {
  if (searchBusy) return;
  searchBusy = true;
  getJson("/api/searches/" + encodeURIComponent(id))
    .then(s => { showError(""); renderSearch(s); })
    .catch(e => { showError("search " + id + ": " + e.message); $("search-message").textContent = e.message; })
    .finally(() => { searchBusy = false; });
}
// The trial to highlight: the search's best once it ended with one, else the best last value so far
// (none when the search FAILED: no trial succeeded).
function bestTrial(s) {
  if (s.best >= 0) return s.best;
  if (s.state === "FAILED") return -1;
  let best = -1, value = 0;
  for (const t of s.trials) {
    if (!t.values.length) continue;
    const v = t.values[t.values.length - 1][1];
    if (best < 0 || (s.mode === "min" ? v < value : v > value)) { best = t.index; value = v; }
  }
  return best;
}
function renderSearch(s) {
  const best = bestTrial(s), ended = s.best >= 0;
  $("search-id").textContent = s.id;
  $("search-state").replaceChildren(state(s.state));
  $("search-kv").replaceChildren(...[
    ["name", s.name], ["scheduler", s.scheduler === "asha" ? "asha (grace " + s.grace + ", eta " + s.eta + ")" : s.scheduler],
    ["metric", s.metric + " (" + s.mode + ")"], ["epochs per trial", s.epochs], ["trials", s.trials.length],
    ["trial-epochs", s.trial_epochs + " of " + s.trial_epochs_budget],
    ["best", best < 0 ? "none yet" : "trial " + best + (ended ? ": " + num(s.best_value, 4) : " so far")]]
    .map(([k, v]) => el("span", k + ": " + v)));
  $("search-message").textContent = s.message || "";
  // One line per trial over the whole epoch budget, so a trial stopped early visibly ends early; the
  // best is drawn last, thick and dark; with many trials only the best is named in the legend.
  const line = t => ({name: "trial " + t.index + (t.index === best ? (ended ? " (best)" : " (best so far)") : ""),
                      points: t.values, color: t.index === best ? bestColor : trialColor(t.index),
                      width: t.index === best ? 3.4 : 1.3, end: t.stopped_at > 0 ? "x" : null,
                      legend: t.index === best || s.trials.length <= 6});
  const series = s.trials.filter(t => t.index !== best).map(line).concat(s.trials.filter(t => t.index === best).map(line));
  lineChart($("chart-search"), series, {x: "epoch", xmin: 1, xmax: s.epochs, integerX: true,
                                        empty: "no trial finished an epoch yet"});
  const stopped = s.trials.filter(t => t.stopped_at > 0).length;
  $("search-chart-note").textContent = s.metric + " at the end of each epoch, one line per trial" +
    (stopped ? "; \u00D7 marks where " + stopped + (stopped === 1 ? " trial was" : " trials were") + " stopped early" : "") + ".";
  // The trials: a column per searched setting.
  const keys = s.trials.length ? Object.keys(s.trials[0].settings) : [];
  $("search-trials-head").replaceChildren(...["Trial", "State", ...keys, "Epochs", s.metric, "Wall", "Job", "Note"].map(c => el("th", c)));
  fill("search-trials", s.trials.map(t => {
    const swatch = el("span", "\u25A0 "), cell = el("span");
    swatch.style.color = t.index === best ? bestColor : trialColor(t.index);
    cell.append(swatch, String(t.index) + (t.index === best ? (ended ? " best" : " best so far") : ""));
    const last = t.values.length ? t.values[t.values.length - 1][1] : null;
    const trained = t.epochs.length ? t.epochs[t.epochs.length - 1].epoch : 0;
    return row([cell, state(t.state), ...keys.map(k => t.settings[k]), trained + "/" + s.epochs,
                last === null ? "" : num(last, 4), t.wall_seconds > 0 ? eta(t.wall_seconds) : "",
                t.state === "WAITING" ? "" : jobLink(t.job),
                el("span", t.message || (t.stopped_at > 0 ? "stopped early at epoch " + t.stopped_at : ""))],
               t.index === best ? "best" : t.stopped_at > 0 ? "stopped" : "");
  }));
}
)JS";

}  // namespace troupe::dashboard::page_parts

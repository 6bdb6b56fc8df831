// The page's script, part 0 (page.h): tables filled a page at a time from the API's paged lists
// (/api/actors, /api/nodes, /api/jobs, /api/searches: `limit`, `after` = the page before's `next`).
#include "dashboard/page.h"

namespace troupe::dashboard::page_parts {

const char* const kPagerJs = R"JS(
// A table <tbody id=NAME> filled from `path` a page of `size` at a time, with the controls
// NAME-prev, NAME-range and NAME-next (page_html.cc). `filters()` gives the query's filters,
// `rows(answer)` the table's rows. Next follows the answer's cursor and previous goes back to the
// cursor it came from (a stack of `after`s), so a page shows the items after the same point even
// when others were added or removed meanwhile; new filters start again at the first page.
// `load(force)` asks again unless, without force, the last request is younger than `everyMs`;
// one request at a time: a forced load while one is in flight follows it.
function pagedTable(name, path, size, everyMs, filters, rows) {
  const t = {afters: [""], filters: null, next: null, busy: false, again: false, last: 0};
  t.load = force => {
    const q = filters();
    if (q.toString() !== t.filters) { t.filters = q.toString(); t.afters = [""]; force = true; }
    if (t.busy) { t.again = t.again || force; return; }
    if (!force && Date.now() - t.last < everyMs) return;
    q.set("limit", String(size));
    const after = t.afters[t.afters.length - 1];
    if (after) q.set("after", after);
    t.busy = true;
    t.last = Date.now();
    getJson(path + "?" + q.toString())
      .then(r => {
        t.next = r.next || null;
        fill(name, rows(r));
        $(name + "-range").textContent = pageRange(r);
        $(name + "-prev").disabled = t.afters.length <= 1;
        $(name + "-next").disabled = !t.next;
      })
      .catch(e => { $(name + "-range").textContent = e.message; })
      .finally(() => {
        t.busy = false;
        if (t.again) { t.again = false; t.load(true); }
      });
  };
  $(name + "-prev").addEventListener("click", () => { if (t.afters.length > 1) { t.afters.pop(); t.load(true); } });
  $(name + "-next").addEventListener("click", () => { if (t.next) { t.afters.push(t.next); t.load(true); } });
  return t;
}
// "101-200 of 10000"
function pageRange(r) {
  if (r.total === 0) return "none";
  if (r.returned === 0) return "none after this page's start, of " + r.total;
  return (r.start + 1) + "-" + (r.start + r.returned) + " of " + r.total;
}
)JS";

}  // namespace troupe::dashboard::page_parts

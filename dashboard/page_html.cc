// The dashboard page (page.h): markup and styles, and the assembly of the parts.
#include "dashboard/page.h"

namespace troupe::dashboard {

const std::string& dashboard_page() {
  static const std::string page = std::string(page_parts::kHtmlHead) + "<script>\n\"use strict\";\n" +
                                  page_parts::kPagerJs + page_parts::kCoreJs + page_parts::kChartsJs +
                                  page_parts::kSearchJs + page_parts::kViewsJs + "</script>\n" + page_parts::kHtmlTail;
  return page;
}

namespace page_parts {

const char* const kHtmlHead = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>troupe dashboard</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f5f6f8; }
  header { background: #1d2330; color: #fff; padding: 10px 20px; display: flex; gap: 24px; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 18px; margin: 0; }
  header nav a { color: #c9d1e0; margin-right: 14px; text-decoration: none; }
  header nav a.on { color: #fff; font-weight: 600; border-bottom: 2px solid #3b82f6; }
  #live { font-size: 12px; }
  #live.ok::before { content: "\25CF "; color: #3ccf6e; }
  #live.bad::before { content: "\25CF "; color: #e5484d; }
  main { padding: 12px 20px; }
  section { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; margin-bottom: 14px; padding: 10px 14px; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  h3 { font-size: 13px; margin: 4px 0; color: #3b4350; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eef0f3; white-space: nowrap; }
  th { font-weight: 600; color: #5b6472; font-size: 12px; }
  td.msg, td:last-child { white-space: normal; }
  a { color: #2563eb; }
  .mono { font-family: ui-monospace, monospace; font-size: 12px; }
  .state { font-weight: 600; border-radius: 3px; padding: 1px 6px; }
  .ALIVE, .RUNNING, .SUCCEEDED { background: #d9f5e3; color: #126b33; }
  .SUSPECT, .PENDING, .RESTARTING { background: #fdf0cf; color: #8a5a00; }
  .DEAD, .FAILED { background: #fbd9da; color: #b4161b; }
  .CANCELLED, .FINISHED, .WAITING { background: #e6e8ec; color: #4b5260; }
  tr.dead td { background: #fff3f3; }
  tr.best td { background: #eef4ff; font-weight: 600; }
  tr.stopped td { color: #5b6472; }
  .bar { width: 120px; height: 8px; background: #eef0f3; border-radius: 4px; display: inline-block; vertical-align: middle; }
  .bar > div { height: 8px; background: #3b82f6; border-radius: 4px; }
  #summary span { margin-right: 18px; }
  #error { color: #b4161b; }
  input, select, button { font: inherit; padding: 2px 6px; }
  .note { color: #5b6472; font-size: 12px; }
  .pager button:disabled { opacity: 0.4; }
  #timeline-legend span { margin-right: 8px; }
  #timeline-legend span::before { content: "\25A0 "; }
  .legend-data_us::before { color: #9aa5b5; } .legend-compute_us::before { color: #3b82f6; }
  .legend-comm_us::before { color: #f59e0b; } .legend-optimizer_us::before { color: #10b981; }
  .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px; }
  canvas { width: 100%; height: 220px; display: block; }
  canvas.tall { height: 260px; }
  .alert { border-radius: 4px; padding: 6px 10px; margin: 6px 0; }
  .alert.warn { background: #fdf0cf; color: #6b4600; }
  .alert.bad { background: #fbd9da; color: #8f1216; }
  .filters { display: flex; gap: 10px; flex-wrap: wrap; align-items: center; margin-bottom: 8px; }
  pre.log { background: #11151c; color: #dfe5ee; padding: 8px; overflow: auto; max-height: 540px; font-size: 12px; margin: 4px 0 10px; }
  .kv span { margin-right: 20px; }
  .view { display: none; }
  .view.on { display: block; }
</style>
</head>
<body>
<header><h1>troupe</h1>
<nav><a href="#/" id="nav-overview">Overview</a><a href="#/searches" id="nav-searches">Searches</a><a href="#/events" id="nav-events">Events</a><a href="#/logs" id="nav-logs">Logs</a></nav>
<span id="summary"></span><span id="live" class="bad">connecting</span></header>
<main>
<div id="error"></div>

<div class="view" id="view-overview">
<section><h2>Nodes</h2><div class="filters"><span class="pager"><button id="nodes-prev">&lsaquo; previous</button> <span class="note" id="nodes-range"></span> <button id="nodes-next">next &rsaquo;</button></span></div><table><thead><tr><th>ID</th><th>State</th><th>Address</th><th>Host</th><th>CPUs</th>
<th>GPUs</th><th>Memory GiB</th><th>Heartbeat</th><th></th></tr></thead><tbody id="nodes"></tbody></table></section>
<section><h2>Jobs</h2><div class="filters"><span class="pager"><button id="jobs-prev">&lsaquo; previous</button> <span class="note" id="jobs-range"></span> <button id="jobs-next">next &rsaquo;</button></span></div><table><thead><tr><th>ID</th><th>Name</th><th>Strategy</th><th>State</th><th>Workers</th>
<th>Epoch</th><th>Progress</th><th>Loss</th><th>Samples/s</th><th>Accuracy</th><th>ETA</th><th>Message</th></tr></thead>
<tbody id="jobs"></tbody></table></section>
<section><h2>Actors</h2><div id="actor-counts"></div>
<div class="filters"><input id="actor-q" placeholder="search actors (id, type, name, node, reason)" size="40">
<select id="actor-state"><option value="">any state</option><option>PENDING</option><option>ALIVE</option>
<option>RESTARTING</option><option>FINISHED</option><option>DEAD</option></select>
<input id="actor-node" placeholder="node id prefix" size="14"><input id="actor-type" placeholder="type" size="14">
<span class="note" id="actor-note"></span><span class="pager"><button id="actors-prev">&lsaquo; previous</button> <span class="note" id="actors-range"></span> <button id="actors-next">next &rsaquo;</button></span></div>
<table><thead><tr><th>ID</th><th>Type</th><th>Name</th><th>Job</th><th>Node</th><th>State</th><th>Restarts</th><th>Reason</th></tr></thead>
<tbody id="actors"></tbody></table></section>
<section><h2>Recent events</h2><table><thead><tr><th>Time</th><th>Kind</th><th>Subject</th><th>Message</th></tr></thead>
<tbody id="events"></tbody></table><p class="note"><a href="#/events">all events, with filters</a></p></section>
</div>

<div class="view" id="view-job">
<section><h2>Job <span class="mono" id="job-id"></span> <span id="job-state"></span></h2>
<div class="kv" id="job-kv"></div><div id="job-alerts"></div><div class="note" id="job-message"></div></section>
<section><h2>Training</h2><div class="charts">
<div class="chart"><h3>Loss per step</h3><canvas id="chart-loss"></canvas></div>
<div class="chart"><h3>Loss and accuracy per epoch</h3><canvas id="chart-epochs"></canvas></div>
<div class="chart"><h3>Samples/s per worker</h3><canvas id="chart-rate"></canvas></div>
<div class="chart"><h3>Time per step: computation vs communication (ms, mean per worker)</h3><canvas id="chart-split"></canvas></div>
</div></section>
<section><h2>Step timeline</h2><div class="note">The newest steps of every worker, in wall-clock time:
<span id="timeline-legend"></span>.
Export: <span class="mono" id="timeline-cmd"></span> (Chrome trace; opens in Perfetto), or
<a id="timeline-link" download="trace.json">download trace.json</a>.</div>
<canvas id="chart-timeline" class="tall"></canvas>
<table><thead><tr><th>Worker</th><th>Now</th><th>Steps</th><th>Step ms</th><th>Data ms</th><th>Fwd/bwd ms</th>
<th id="th-comm">Comm ms</th><th id="th-optimizer">Optimizer ms</th><th>Comm thread ms</th><th>Samples/s</th></tr></thead><tbody id="job-workers"></tbody></table></section>
<section><h2>Collective group</h2><div class="note" id="group-note"></div>
<table><thead><tr><th>Rank</th><th>Node</th><th>Actor</th><th>Address</th></tr></thead><tbody id="group-members"></tbody></table></section>
<section><h2>Actors of the job</h2><table><thead><tr><th>ID</th><th>Type</th><th>Node</th><th>State</th><th>Restarts</th><th>Reason</th></tr></thead>
<tbody id="job-actors"></tbody></table></section>
<section><h2>Events of the job</h2><table><thead><tr><th>Time</th><th>Kind</th><th>Message</th></tr></thead>
<tbody id="job-events"></tbody></table></section>
</div>

<div class="view" id="view-searches">
<section><h2>Searches</h2>
<div class="filters"><select id="search-filter"><option value="">any state</option><option>RUNNING</option>
<option>SUCCEEDED</option><option>FAILED</option><option>CANCELLED</option></select>
<span class="note" id="search-note"></span><span class="pager"><button id="searches-prev">&lsaquo; previous</button> <span class="note" id="searches-range"></span> <button id="searches-next">next &rsaquo;</button></span></div>
<table><thead><tr><th>ID</th><th>Name</th><th>State</th><th>Scheduler</th><th>Metric</th><th>Trials</th>
<th>Best</th><th>Started</th><th>Message</th></tr></thead><tbody id="searches"></tbody></table></section>
</div>

<div class="view" id="view-search">
<section><h2>Search <span class="mono" id="search-id"></span> <span id="search-state"></span></h2>
<div class="kv" id="search-kv"></div><div class="note" id="search-message"></div></section>
<section><h2>Metric per epoch</h2><canvas id="chart-search" class="tall"></canvas>
<div class="note" id="search-chart-note"></div></section>
<section><h2>Trials</h2><table><thead><tr id="search-trials-head"></tr></thead><tbody id="search-trials"></tbody></table></section>
</div>

<div class="view" id="view-events">
<section><h2>Events timeline</h2>
<div class="filters"><select id="ev-kind"><option value="">every kind</option></select>
<input id="ev-subject" placeholder="subject: node, actor or job id prefix" size="30">
<select id="ev-since"><option value="300">last 5 minutes</option><option value="3600" selected>last hour</option>
<option value="86400">last day</option><option value="0">all kept</option></select>
<span class="note" id="ev-note"></span></div>
<canvas id="chart-events"></canvas>
<table><thead><tr><th>Time</th><th>Kind</th><th>Subject</th><th>Message</th></tr></thead><tbody id="ev-rows"></tbody></table></section>
</div>

<div class="view" id="view-logs">
<section><h2>Logs</h2>
<div class="filters"><select id="log-node"><option value="">every node</option></select>
<input id="log-actor" placeholder="actor id prefix" size="16"><input id="log-job" placeholder="job id prefix" size="16">
<select id="log-lines"><option>50</option><option selected>200</option><option>1000</option></select>
<label><input type="checkbox" id="log-follow" checked> follow</label><button id="log-refresh">refresh</button>
<span class="note" id="log-note"></span></div>
<div id="log-out"></div></section>
</div>

<p class="note">Live from <span class="mono">/api/stream</span>; the JSON API is described in docs/dashboard.md.</p>
</main>
)PAGE";

const char* const kHtmlTail = R"PAGE(</body>
</html>
)PAGE";

}  // namespace page_parts
}  // namespace troupe::dashboard

// The dashboard's one page (GET /): HTML, CSS and JavaScript in one string compiled into the
// binary, so the dashboard needs nothing from the network. It listens to /api/stream (falling back
// to polling /api/cluster every second where EventSource is missing or the stream fails) and draws
// the summary, nodes (DEAD in red), jobs with their progress, an actor search (/api/actors) and the
// recent events. Charts of a job's metrics are planned (issue 7, next part).
#pragma once

namespace troupe::dashboard {

// The page, as UTF-8 HTML.
const char* dashboard_page();

}  // namespace troupe::dashboard

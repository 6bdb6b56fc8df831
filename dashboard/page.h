// The dashboard page (GET /): HTML, CSS and JavaScript compiled into the binary, so the dashboard
// needs nothing from the network; charts are drawn by the page's own code on <canvas>. One page
// with views chosen by the URL's fragment:
//
//   #/            overview: summary, nodes (DEAD in red), jobs, actors (filters, search), recent events;
//                 nodes, jobs and actors in pages
//   #/job/<id>    a job: progress, charts (loss per step, loss and accuracy per epoch, samples/s per
//                 worker, communication vs computation), the step timeline with the straggler and a
//                 stuck collective named, the collective group's members, its actors and events
//   #/searches    hyperparameter searches (`troupe tune`): state, trials by state, best value so far
//   #/search/<id> a search: its trials (settings, epochs, metric, wall time, why stopped; the best
//                 highlighted) and a chart of every trial's metric per epoch
//   #/events      the events timeline, filtered by kind, subject and time
//   #/logs        the nodes' logs, filtered by node, actor and job
//
// The overview listens to /api/stream (falling back to polling /api/cluster every second); the
// other views poll their endpoints while shown. Cluster text is inserted as text, never as HTML.
// The long lists (nodes, jobs, actors, searches) are read a page at a time, with next and previous
// (page_pager_js.cc). The parts live in page_html.cc (markup, styles), page_pager_js.cc, page_core_js.cc
// (helpers, overview, stream),
// page_charts_js.cc (the canvas charts), page_search_js.cc (the search views) and page_views_js.cc
// (job, events and logs views; it ends by starting the stream and the router, so it comes last).
#pragma once

#include <string>

namespace troupe::dashboard {

// The page, as UTF-8 HTML (built once).
const std::string& dashboard_page();

namespace page_parts {
extern const char* const kHtmlHead;    // <html> .. <body>, styles and markup of every view
extern const char* const kPagerJs;   // pagedTable: a table served a page at a time
extern const char* const kCoreJs;
extern const char* const kChartsJs;
extern const char* const kSearchJs;
extern const char* const kViewsJs;
extern const char* const kHtmlTail;
}  // namespace page_parts

}  // namespace troupe::dashboard

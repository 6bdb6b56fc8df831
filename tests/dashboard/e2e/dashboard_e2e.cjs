// The dashboard in a real browser (headless Chromium driven by playwright-core): run_e2e.sh brings
// a local cluster up and submits a job, then this script opens the dashboard and checks what a
// user relies on — the nodes are listed, the actors page by next and previous, the job page's loss chart grows while the job trains, a
// node killed with SIGKILL turns DEAD (red) and its node_died event appears; a hyperparameter
// search's page draws a line per trial and highlights the best once the search ended. Screenshots go to
// E2E_SHOTS. Every wait has a deadline; the whole script gives up after E2E_DEADLINE_S.
//
// Environment: E2E_URL (the dashboard), E2E_JOB (job id), E2E_KILL_PID (a node's pid),
// E2E_KILL_NODE (that node's id), E2E_FINISHED_ACTOR (an actor stopped by the user: it must read
// FINISHED in grey, not DEAD in red), E2E_SEARCH (a search of 3 trials), E2E_SHOTS (directory), E2E_MODULES (node_modules with
// playwright-core), E2E_CHROMIUM (the browser).
"use strict";
const path = require("path");
const { chromium } = require(path.join(process.env.E2E_MODULES, "playwright-core"));

const url = process.env.E2E_URL, job = process.env.E2E_JOB, shots = process.env.E2E_SHOTS;
const killPid = Number(process.env.E2E_KILL_PID), killNode = process.env.E2E_KILL_NODE;
const finishedActor = process.env.E2E_FINISHED_ACTOR || "";
const search = process.env.E2E_SEARCH || "";
const deadline = Number(process.env.E2E_DEADLINE_S || 300);
setTimeout(() => { console.error("e2e: FAILED: the whole test ran past " + deadline + " s"); process.exit(1); },
           deadline * 1000).unref();

function step(text) { console.log("e2e: " + new Date().toISOString().slice(11, 23) + " " + text); }

async function points(page, id) {
  return Number(await page.locator("#" + id).getAttribute("data-points") || 0);
}

async function rangeIs(page, re) {
  await page.waitForFunction(r => new RegExp(r).test(document.getElementById("actors-range").textContent), re.source,
                             { timeout: 20000 });
}

// The actor table's pager: the first page of 100, next shows the ones after it (none of the first
// page's), previous the first page again.
async function pages(page) {
  await rangeIs(page, /^1-100 of (1[0-9][0-9]|[2-9][0-9][0-9])$/);
  const first = (await page.locator("#actors tr td").first().textContent()).trim();
  await page.click("#actors-next");
  await rangeIs(page, /^101-[0-9]+ of [0-9]+$/);
  if (await page.locator("#actors tr", { hasText: first }).count() !== 0) throw new Error("page 2 repeats actor " + first);
  await page.click("#actors-prev");
  await rangeIs(page, /^1-100 of /);
  const again = (await page.locator("#actors tr td").first().textContent()).trim();
  if (again !== first) throw new Error("previous showed " + again + " first, not " + first);
  step("actors paged: " + (await page.locator("#actors-range").textContent()) + ", next and previous");
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.E2E_CHROMIUM || "/usr/bin/chromium",
    // Root in a container: Chromium's sandbox needs user namespaces it may not have.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    timeout: 60000,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.setDefaultTimeout(30000);
    const errors = [];
    page.on("pageerror", e => errors.push(String(e)));
    // Nothing may come from outside the dashboard: every request goes to its own origin.
    const origin = new URL(url).origin;
    page.on("request", r => { if (!r.url().startsWith(origin) && !r.url().startsWith("data:")) errors.push("external request " + r.url()); });

    step("opening " + url);
    await page.goto(url, { waitUntil: "domcontentloaded" });
    await page.waitForFunction(() => document.querySelectorAll("#nodes tr").length >= 3, null, { timeout: 20000 });
    const alive = await page.locator("#nodes tr", { hasText: "ALIVE" }).count();
    step("nodes listed: " + alive + " ALIVE");
    if (alive < 3) throw new Error("expected 3 ALIVE nodes (head + 2), saw " + alive);
    await page.locator("#jobs tr", { hasText: job.slice(0, 8) }).waitFor({ timeout: 20000 });
    if (!finishedActor) throw new Error("run_e2e.sh passed no E2E_FINISHED_ACTOR");
    // Actors come 100 a page (run_e2e.sh spawned 120 more): the stopped one is found by the search box.
    await page.fill("#actor-q", finishedActor.slice(0, 12));
    const ended = page.locator("#actors tr", { hasText: finishedActor.slice(0, 8) });
    await ended.locator(".state.FINISHED").waitFor({ timeout: 20000 });
    if (await ended.locator(".state.DEAD").count() !== 0) throw new Error("the stopped actor reads DEAD");
    step("the actor stopped by the user reads FINISHED (grey)");
    await page.fill("#actor-q", "");
    await pages(page);
    await page.screenshot({ path: path.join(shots, "dashboard-overview.png"), fullPage: true });

    step("job page of " + job);
    await page.goto(url + "/#/job/" + job);
    await page.waitForFunction(() => Number(document.querySelector("#chart-loss").dataset.points || 0) > 0, null,
                               { timeout: 90000 });
    const first = await points(page, "chart-loss");
    step("loss chart has " + first + " points; waiting for it to grow");
    await page.waitForFunction(n => Number(document.querySelector("#chart-loss").dataset.points || 0) > n, first,
                               { timeout: 60000 });
    const later = await points(page, "chart-loss");
    step("loss chart grew to " + later + " points");
    // The timeline and the per-worker charts are drawn from the same steps.
    if (await points(page, "chart-timeline") === 0) throw new Error("the step timeline is empty");
    if (await points(page, "chart-rate") === 0) throw new Error("the samples/s chart is empty");
    const members = await page.locator("#group-members tr").count();
    step("collective group: " + members + " members");
    if (members !== 2) throw new Error("expected the 2 workers in the collective group, saw " + members);
    // Two epochs' points on the epoch chart (3 series), when they end within a while (not required:
    // slow hosts); the screenshot is nicer with them.
    await page.waitForFunction(() => Number(document.querySelector("#chart-epochs").dataset.points || 0) >= 6, null,
                               { timeout: 45000 }).catch(() => step("fewer than 2 epochs ended; the epoch chart is short"));
    await page.screenshot({ path: path.join(shots, "dashboard-job.png"), fullPage: true });

    if (!search) throw new Error("run_e2e.sh passed no E2E_SEARCH");
    step("search page of " + search);
    await page.goto(url + "/#/searches");
    await page.locator("#searches tr", { hasText: search.slice(0, 8) }).waitFor({ timeout: 20000 });
    await page.goto(url + "/#/search/" + search);
    await page.waitForFunction(() => /SUCCEEDED|FAILED|CANCELLED/.test(document.querySelector("#search-state").textContent),
                               null, { timeout: 150000 });
    const searchState = (await page.locator("#search-state").textContent()).trim();
    if (!/SUCCEEDED/.test(searchState)) throw new Error("the search ended " + searchState);
    const trialRows = await page.locator("#search-trials tr").count();
    if (trialRows !== 3) throw new Error("expected 3 trial rows, saw " + trialRows);
    if (await page.locator("#search-trials tr.best").count() !== 1) throw new Error("no single best trial row highlighted");
    if (await points(page, "chart-search") < 3) throw new Error("the search chart has fewer points than trials");
    step("search SUCCEEDED: " + trialRows + " trials, " + await points(page, "chart-search") + " points, the best highlighted");
    await page.screenshot({ path: path.join(shots, "dashboard-search.png"), fullPage: true });

    step("SIGKILL to node " + killNode.slice(0, 8) + " (pid " + killPid + ")");
    process.kill(killPid, "SIGKILL");
    const killedAt = Date.now();
    await page.goto(url + "/#/");
    const row = page.locator("#nodes tr", { hasText: killNode.slice(0, 8) });
    await row.locator(".state.DEAD").waitFor({ timeout: 15000 });
    step("node DEAD on the page after " + ((Date.now() - killedAt) / 1000).toFixed(1) + " s");
    if (!/\bdead\b/.test(await row.getAttribute("class") || "")) throw new Error("the DEAD node's row is not marked dead (red)");
    await page.locator("#events tr", { hasText: "node_died" }).first().waitFor({ timeout: 15000 });
    step("node_died event shown");
    await page.screenshot({ path: path.join(shots, "dashboard-node-dead.png"), fullPage: true });

    step("events view");
    await page.goto(url + "/#/events");
    await page.selectOption("#ev-kind", "node_died");
    // Filtered: only node_died rows, the killed node's among them.
    await page.waitForFunction(node => {
      const rows = [...document.querySelectorAll("#ev-rows tr")];
      return rows.length > 0 && rows.every(r => r.textContent.includes("node_died")) &&
             rows.some(r => r.textContent.includes(node));
    }, killNode.slice(0, 8), { timeout: 15000 });
    await page.screenshot({ path: path.join(shots, "dashboard-events.png"), fullPage: true });

    step("logs view");
    await page.goto(url + "/#/logs");
    await page.locator("#log-out pre").first().waitFor({ timeout: 15000 });
    await page.screenshot({ path: path.join(shots, "dashboard-logs.png"), fullPage: true });

    if (errors.length) throw new Error("page errors: " + errors.join("; "));
    step("PASSED");
  } finally {
    await browser.close();
  }
}

main().catch(e => { console.error("e2e: FAILED: " + (e && e.stack || e)); process.exit(1); });

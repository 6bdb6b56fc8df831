// The page's script, part 2 (page.h): charts drawn on <canvas> by the page itself (no library, no
// asset from anywhere). Every chart sets data-points on its canvas to the number of points drawn,
// so tests (and people with the inspector) can see it grow.
#include "dashboard/page.h"

namespace troupe::dashboard::page_parts {

const char* const kChartsJs = R"JS(
const palette = ["#3b82f6", "#e5484d", "#10b981", "#f59e0b", "#8b5cf6", "#0ea5e9", "#ec4899", "#64748b"];
const phaseColors = {data_us: "#9aa5b5", compute_us: "#3b82f6", comm_us: "#f59e0b", optimizer_us: "#10b981"};

// A canvas sized to its box at the screen's pixel ratio; returns [context, width, height].
function surface(cv) {
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth || 480, h = cv.clientHeight || 220;
  if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
  }
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  g.font = "11px system-ui, sans-serif";
  return [g, w, h];
}
function fmt(v) {
  const a = Math.abs(v);
  if (a >= 10000) return (v / 1000).toFixed(0) + "k";
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}
function emptyNote(g, text) { g.fillStyle = "#5b6472"; g.fillText(text, 12, 22); }

// series: [{name, color, points: [[x, y], ...], axis: "left"|"right", width, end: "x" (a cross at its
// last point), legend: false (left out of the legend)}];
// opt: {x, empty, right, zero, xmin, xmax (widen the x range), integerX (ticks at whole numbers)}
function lineChart(cv, series, opt) {
  const [g, w, h] = surface(cv);
  const total = series.reduce((n, s) => n + s.points.length, 0);
  cv.dataset.points = total;
  if (!total) return emptyNote(g, opt.empty || "no data yet");
  const L = 48, R = opt.right ? 44 : 12, T = 22, B = 26, pw = w - L - R, ph = h - T - B;
  const all = series.flatMap(s => s.points);
  let x0 = Math.min(...all.map(p => p[0])), x1 = Math.max(...all.map(p => p[0]));
  if (opt.xmin !== undefined) x0 = Math.min(x0, opt.xmin);
  if (opt.xmax !== undefined) x1 = Math.max(x1, opt.xmax);
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const range = side => {
    const ys = series.filter(s => (s.axis || "left") === side).flatMap(s => s.points.map(p => p[1]));
    if (!ys.length) return null;
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (opt.zero) y0 = Math.min(0, y0);
    if (y0 === y1) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
    return [y0, y1];
  };
  const ranges = {left: range("left"), right: range("right")};
  const X = x => L + (x - x0) / (x1 - x0) * pw;
  const Y = (y, side) => { const [a, b] = ranges[side]; return T + ph - (y - a) / (b - a) * ph; };
  g.strokeStyle = "#e5e8ec"; g.fillStyle = "#5b6472"; g.lineWidth = 1;
  for (let i = 0; i <= 4; ++i) {
    const y = T + ph * i / 4;
    g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke();
    for (const side of ["left", "right"]) {
      if (!ranges[side]) continue;
      const [a, b] = ranges[side], v = b - (b - a) * i / 4;
      g.textAlign = side === "left" ? "right" : "left";
      g.fillText(fmt(v), side === "left" ? L - 4 : L + pw + 4, y + 4);
    }
  }
  g.textAlign = "center";
  if (opt.integerX) {  // whole numbers (epochs): a tick at every one, or every few when many
    const every = Math.max(1, Math.ceil((x1 - x0) / 10));
    for (let x = Math.ceil(x0); x <= x1; x += every) g.fillText(String(x), X(x), h - 10);
  } else {
    for (let i = 0; i <= 5; ++i) { const x = x0 + (x1 - x0) * i / 5; g.fillText(fmt(x), X(x), h - 10); }
  }
  g.fillText(opt.x || "", L + pw / 2, h - 0.5);
  series.forEach((s, k) => {
    const side = s.axis || "left";
    g.strokeStyle = g.fillStyle = s.color || palette[k % palette.length];
    g.lineWidth = s.width || 1.6;
    g.beginPath();
    s.points.forEach((p, i) => (i ? g.lineTo(X(p[0]), Y(p[1], side)) : g.moveTo(X(p[0]), Y(p[1], side))));
    g.stroke();
    if (s.points.length <= 40) for (const p of s.points) { g.beginPath(); g.arc(X(p[0]), Y(p[1], side), 2.5, 0, 7); g.fill(); }
    if (s.end === "x" && s.points.length) {  // a line that was cut short: a cross where it ends
      const p = s.points[s.points.length - 1], x = X(p[0]), y = Y(p[1], side);
      g.lineWidth = 2;
      g.beginPath(); g.moveTo(x - 5, y - 5); g.lineTo(x + 5, y + 5); g.moveTo(x + 5, y - 5); g.lineTo(x - 5, y + 5); g.stroke();
    }
  });
  legend(g, series.map((s, k) => [s.name + ((s.axis || "left") === "right" ? " (right)" : ""),
                                  s.color || palette[k % palette.length]]).filter((_, k) => series[k].legend !== false), L + 4);
}
// A row of "■ name" entries from x, as wide as their text.
function legend(g, entries, x) {
  g.textAlign = "left";
  for (const [name, color] of entries) {
    g.fillStyle = color;
    g.fillText("\u25A0 " + name, x, 12);
    x += g.measureText("\u25A0 " + name).width + 14;
  }
}

// rows: [{label, parts: [{name, value, color}], bad}] drawn as stacked horizontal bars.
function stackedBars(cv, rows, unit) {
  cv.style.height = (40 + 32 * Math.max(rows.length, 1)) + "px";
  const [g, w, h] = surface(cv);
  cv.dataset.points = rows.length;
  if (!rows.length) return emptyNote(g, "no steps recorded yet");
  const L = 70, R = 60, T = 22, pw = w - L - R, bh = Math.min(26, (h - T - 8) / rows.length - 6);
  const max = Math.max(...rows.map(r => r.parts.reduce((a, p) => a + p.value, 0))) || 1;
  rows.forEach((r, i) => {
    const y = T + i * (bh + 6);
    g.fillStyle = r.bad ? "#b4161b" : "#1d2330"; g.textAlign = "right";
    g.fillText(r.label, L - 6, y + bh / 2 + 4);
    let x = L;
    for (const p of r.parts) {
      const pxw = p.value / max * pw;
      g.fillStyle = p.color; g.fillRect(x, y, pxw, bh); x += pxw;
    }
    g.fillStyle = "#1d2330"; g.textAlign = "left";
    g.fillText(fmt(r.parts.reduce((a, p) => a + p.value, 0)) + " " + unit, x + 4, y + bh / 2 + 4);
  });
  legend(g, rows[0].parts.map(p => [p.name, p.color]), 8);
}

// The newest steps of every worker on one wall-clock axis: a row per worker, a box per phase.
// `order`: the phase keys in the order a step runs them (the timeline answer's phases).
function timelineChart(cv, workers, straggler, order) {
  cv.style.height = Math.min(600, 40 + 40 * Math.max(workers.length, 1)) + "px";
  const [g, w, h] = surface(cv);
  const withSteps = workers.filter(x => x.steps.length);
  cv.dataset.points = withSteps.reduce((n, x) => n + x.steps.length, 0);
  if (!withSteps.length) return emptyNote(g, "no steps recorded yet (workers record them while they train)");
  // Workers publish every 500 ms, each on its own clock: the window ends where every worker's steps
  // are in, and spans about 24 steps of the slowest.
  const end = Math.min(...withSteps.map(x => stepEnd(x.steps[x.steps.length - 1])));
  const span = Math.max(...withSteps.map(x => {
    const s = x.steps.filter(v => v.start_us <= end).slice(-24);
    return s.length ? stepEnd(s[s.length - 1]) - s[0].start_us : 0;
  })) || 1000;
  const start = end - span * 1.02;
  const L = 70, R = 10, T = 8, B = 22, pw = w - L - R, rh = Math.min(34, (h - T - B) / workers.length - 6);
  const X = t => L + (t - start) / (end - start) * pw;
  workers.forEach((wk, i) => {
    const y = T + i * (rh + 6);
    g.fillStyle = straggler === wk.rank ? "#b4161b" : "#1d2330"; g.textAlign = "right";
    g.fillText("worker " + wk.rank, L - 6, y + rh / 2 + 4);
    for (const s of wk.steps) {
      if (stepEnd(s) < start || s.start_us > end) continue;
      let t = s.start_us;
      for (const k of order) {
        const x = Math.max(X(t), L), x2 = Math.min(X(t + s[k]), L + pw);
        if (x2 > x) { g.fillStyle = phaseColors[k]; g.fillRect(x, y, Math.max(x2 - x, 0.5), rh); }
        t += s[k];
      }
    }
  });
  g.fillStyle = "#5b6472"; g.textAlign = "center";
  for (let i = 0; i <= 4; ++i) {
    const t = start + (end - start) * i / 4;
    g.textAlign = i === 0 ? "left" : i === 4 ? "right" : "center";
    g.fillText(i === 4 ? "newest" : "-" + ((end - t) / 1000).toFixed(1) + " ms", X(t), h - 6);
  }
}
function phaseName(t, key) { const p = t.phases.find(p => p.key === key); return p ? p.name : key; }
function stepEnd(s) { return s.start_us + s.data_us + s.compute_us + s.comm_us + s.optimizer_us; }

// Events on a time axis, one lane per kind.
function eventStrip(cv, events) {
  const kinds = [...new Set(events.map(e => e.kind))].sort();
  cv.style.height = (40 + 18 * Math.max(kinds.length, 1)) + "px";
  const [g, w, h] = surface(cv);
  cv.dataset.points = events.length;
  if (!events.length) return emptyNote(g, "no events match");
  const t0 = Math.min(...events.map(e => e.time_ms)), t1 = Math.max(Date.now(), ...events.map(e => e.time_ms));
  const L = 130, R = 12, T = 6, B = 20, lane = Math.min(18, (h - T - B) / kinds.length);
  const X = t => L + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (w - L - R);
  kinds.forEach((k, i) => {
    const y = T + i * lane + lane / 2;
    g.fillStyle = "#1d2330"; g.textAlign = "right"; g.fillText(k, L - 6, y + 4);
    g.fillStyle = /died|failed|dead|corrupt|suspect/.test(k) ? "#e5484d" : palette[i % palette.length];
    for (const e of events) if (e.kind === k) { g.beginPath(); g.arc(X(e.time_ms), y, 3.5, 0, 7); g.fill(); }
  });
  g.fillStyle = "#5b6472"; g.textAlign = "center";
  for (let i = 0; i <= 4; ++i) {
    const t = t0 + (t1 - t0) * i / 4;
    g.textAlign = i === 0 ? "left" : i === 4 ? "right" : "center";
    g.fillText(new Date(t).toLocaleTimeString(), X(t), h - 5);
  }
}
)JS";

}  // namespace troupe::dashboard::page_parts

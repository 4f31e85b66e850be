// mlgoodput ui, shared by every page: DOM and format helpers, colours, charts, the router.
// Every string from the store goes into the page through textContent or an attribute, never
// as HTML. The page scripts (jobs.js, runs.js, ...) load after this one; main.js starts.
"use strict";

const $main = document.getElementById("main");
const $tip = document.getElementById("tip");
let timers = [];
let charts = [];

// ---- small helpers ------------------------------------------------------------------------
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "style") e.setAttribute("style", v);
    else e.setAttribute(k, v);
  }
  for (const c of kids.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
async function api(path) {
  const r = await fetch("/api/" + path, { credentials: "same-origin" });
  let body;
  try { body = await r.json(); } catch (e) { body = { error: "HTTP " + r.status }; }
  if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
  return body;
}
const enc = encodeURIComponent;
function pct(v) { return v === null || v === undefined ? "–" : v.toFixed(2) + " %"; }
function num(v, d) { return v === null || v === undefined ? "–" : Number(v).toLocaleString(undefined, { maximumFractionDigits: d === undefined ? 2 : d }); }
// ---- formats: the same text as src/mlgoodput/_format.py (tests/ui/test_layout.py checks) --
// durations "570 µs", "282 ms", "4.27 s", "12 min 05 s", "27 h 48 min" (no days), "0 s";
// timestamps ISO 8601, 24-hour, UTC: "2026-11-27 12:11:05 UTC"; FLOP/s with SI prefixes.
// goodput: >= 90 % good (green), >= 60 % fair (amber), below poor (red) (docs/ui.md)
const GOODPUT_GOOD_PCT = 90, GOODPUT_FAIR_PCT = 60;
function goodputLevel(p) {
  if (p === null || p === undefined || isNaN(p)) return "none";
  return p >= GOODPUT_GOOD_PCT ? "good" : p >= GOODPUT_FAIR_PCT ? "fair" : "poor";
}
function roundHalfUp(v, d) { const k = 10 ** d; return Math.floor(Math.abs(v) * k + 0.5) / k; }
function threeDigits(v) {  // a non-negative number to three significant digits: 570, 28.2, 4.27
  if (v === 0) return "0";
  let d = Math.max(0, 2 - Math.floor(Math.log10(v)));
  let r = roundHalfUp(v, d);
  if (r >= 10 ** (3 - d) && d > 0) { d -= 1; r = roundHalfUp(v, d); }  // 9.996 -> 10.0
  return r.toFixed(d);
}
function secs(s) {
  if (s === null || s === undefined || isNaN(s)) return "–";
  if (!isFinite(s)) return s > 0 ? "∞" : "-∞";
  const sign = s < 0 ? "-" : "", a = Math.abs(s);
  if (a === 0) return "0 s";
  for (const [scale, unit, below] of [[1e-6, "µs", 1000], [1e-3, "ms", 1000], [1, "s", 60]]) {
    if (a < scale * below) {
      const t = threeDigits(a / scale);
      if (Number(t) < below) return sign + t + " " + unit;  // 999.6 ms is "1.00 s"
    }
  }
  const whole = Math.floor(a + 0.5);
  if (whole < 3600) return sign + Math.floor(whole / 60) + " min " + String(whole % 60).padStart(2, "0") + " s";
  const m = Math.floor(a / 60 + 0.5);
  return sign + Math.floor(m / 60) + " h " + String(m % 60).padStart(2, "0") + " min";
}
function flops(x, unit) {  // "123 TFLOP/s"; unit "FLOP" for a count
  unit = unit || "FLOP/s";
  if (x === null || x === undefined || isNaN(x)) return "–";
  const sign = x < 0 ? "-" : "", a = Math.abs(x);
  let prefix = "", scale = 1;
  for (const [sc, p] of [[1e3, "k"], [1e6, "M"], [1e9, "G"], [1e12, "T"], [1e15, "P"], [1e18, "E"]]) {
    if (a >= sc || Number(threeDigits(a / sc)) >= 1) { prefix = p; scale = sc; }
  }
  return sign + threeDigits(a / scale) + " " + prefix + unit;
}
const pad2 = (n) => String(n).padStart(2, "0");
function when(t) {
  if (t === null || t === undefined) return "–";
  const d = new Date(t * 1000);
  return d.getUTCFullYear() + "-" + pad2(d.getUTCMonth() + 1) + "-" + pad2(d.getUTCDate()) + " " + clock(t) + " UTC";
}
function clock(t) {  // UTC, for a tooltip or an axis whose title says UTC
  if (t === null || t === undefined) return "–";
  const d = new Date(t * 1000);
  return pad2(d.getUTCHours()) + ":" + pad2(d.getUTCMinutes()) + ":" + pad2(d.getUTCSeconds());
}
function badge(status) { return el("span", { class: "badge b-" + status, "data-status": status, text: status }); }
function card(title, hint, ...kids) {
  return el("section", { class: "card" }, title ? el("h2", { text: title }) : null, hint ? el("div", { class: "hint", text: hint }) : null, ...kids);
}
// tiles in rows of equal length (8 tiles: 4 + 4, never 7 + 1), as many a row as fit minPx each
function evenGrid(node, minPx) {
  const fit = () => {
    const n = node.childElementCount, gap = parseFloat(getComputedStyle(node).columnGap) || 0;
    if (!n || !node.clientWidth) return;
    const perRow = Math.max(1, Math.floor((node.clientWidth + gap) / (minPx + gap)));
    const cols = Math.ceil(n / Math.ceil(n / perRow));
    node.style.gridTemplateColumns = "repeat(" + cols + ", minmax(0, 1fr))";
  };
  new ResizeObserver(fit).observe(node);
  return node;
}
// a table that scrolls down shows whole rows: its box ends at a row's end, not through one
function fitScrolls(root) {
  for (const box of root.querySelectorAll(".scroll:not(.full)")) {
    box.style.maxHeight = "";
    const rows = box.querySelectorAll("tbody tr"), head = box.querySelector("thead");
    if (!rows.length || box.scrollHeight <= box.clientHeight + 1) continue;
    const rowH = rows[0].getBoundingClientRect().height, headH = head ? head.getBoundingClientRect().height : 0;
    const k = Math.max(1, Math.floor((box.clientHeight - headH) / rowH));
    box.style.maxHeight = Math.ceil(headH + k * rowH) + "px";
  }
}
function every(ms, fn) { timers.push(setInterval(fn, ms)); }
function setLive(on) { document.getElementById("live").hidden = !on; }
function showTip(ev, text) {
  $tip.textContent = text;
  $tip.hidden = false;
  const x = Math.min(ev.clientX + 14, window.innerWidth - 370);
  $tip.style.left = x + "px";
  $tip.style.top = (ev.clientY + 14) + "px";
}
function hideTip() { $tip.hidden = true; }
function failed(e) { $main.replaceChildren(el("div", { class: "card err", text: String(e.message || e) })); }

// ---- colors: one per badput bucket (the breakdown, its stacked bar and the timeline) -------
const BUCKET_COLORS = {
  productive: "#22a06b", tpu_initialization: "#f79009", training_prep: "#fdb022",
  program_startup: "#7a5af8", data_loading_sync: "#36bffa", unproductive_checkpoint_save_time: "#2e90fa",
  unproductive_checkpoint_restore_time: "#1849a9", wasted_progress_from_disruption: "#e04f16",
  infrastructure_recovery_from_disruption: "#98a2b3", custom_badput_events: "#ee46bc",
  elastic_slice_down: "#b54708", elastic_scale_up: "#dc6803", elastic_reinitialization: "#93370d",
  stall: "#d92d20", other: "#d0d5dd",
};
const FRACTIONS = new Set(["mfu", "step_mfu", "program_goodput", "scheduling_goodput", "runtime_goodput", "ml_productivity_goodput", "ettr", "available_slice_fraction"]);
const LABELS_EXTRA = { mfu: "MFU", step_mfu: "step MFU", ml_productivity_goodput: "ML productivity goodput", ettr: "ETTR", mtbi_s: "MTBI", mttr_s: "MTTR",
  flops_per_step: "FLOPs per step", peak_flops_per_s: "peak FLOP/s", achieved_flops_per_s: "achieved FLOP/s" };
const PALETTE = ["#2463eb", "#e04f16", "#22a06b", "#7a5af8", "#ee46bc", "#0e9384", "#dc6803", "#475467", "#b42318", "#36bffa"];

// ---- charts (uPlot) -----------------------------------------------------------------------
function chartsReady() { return typeof window.uPlot === "function"; }
function plot(container, opts, data) {
  if (!chartsReady()) {
    container.replaceChildren(el("div", { class: "empty", text: "Charts unavailable: the chart files are not built." }));
    return null;
  }
  container.replaceChildren();
  const width = Math.max(200, container.clientWidth || 800);
  // time scales tick on UTC boundaries (the page's times are UTC): uPlot's tzDate shifts them
  const u = new uPlot(Object.assign({ width, height: 240, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC") }, opts), data, container);
  charts.push(u);
  // the chart follows its box, not only the window: a card beside it shown or hidden after
  // the chart was made (their data come in any order) changes the box's width too
  const fit = new ResizeObserver(() => {
    if (u.root.parentElement !== container) { fit.disconnect(); return; }  // destroyed, or replaced
    const cw = container.clientWidth;
    if (cw > 0 && Math.max(200, cw) !== u.width) u.setSize({ width: Math.max(200, cw), height: u.height });
  });
  fit.observe(container);
  return u;
}
function bytes(v) {
  const a = Math.abs(v);
  for (const [k, u] of [[2 ** 40, "TiB"], [2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"]]) if (a >= k) return (v / k).toFixed(a / k >= 100 ? 0 : 1) + " " + u;
  return v + " B";
}
function valueFormat(name) {
  if (/bytes$/.test(name)) return (v) => (v === null ? "" : bytes(v));
  if (/percent|_pct$/.test(name)) return (v) => (v === null ? "" : v + " %");
  return (v) => (v === null ? "" : Number(v).toLocaleString(undefined, { maximumSignificantDigits: 4 }));
}
// axes: each with a title; ticks far enough apart not to overlap on a 390 px screen
const AXIS_FONT = { labelSize: 20, labelFont: "600 12px system-ui, sans-serif", font: "11px system-ui, sans-serif" };
function axisTime(label) {  // UTC, 24-hour: "12:11" or "12:11:05", with the day once ticks are days apart
  return Object.assign({ label: label || "time (UTC)", space: 64, values: (u, vs) => {
    const span = (u.scales.x.max || 0) - (u.scales.x.min || 0), ts = vs.filter((t) => t !== null);
    const step = ts.length > 1 ? ts[1] - ts[0] : span;
    const dec = step < 1 ? Math.min(3, Math.ceil(-Math.log10(step) - 1e-9)) : 0;  // ticks under a second apart
    const sec = dec > 0 || ts.some((t) => Math.round(t) % 60 !== 0);
    return vs.map((t) => {
      if (t === null) return "";
      if (span > 86400) return when(t).slice(5, 16);
      if (!sec) return clock(t).slice(0, 5);
      if (!dec) return clock(Math.round(t));
      const r = Math.round(t * 10 ** dec) / 10 ** dec;
      return clock(Math.floor(r)) + (r - Math.floor(r)).toFixed(dec).slice(1);
    });
  } }, AXIS_FONT);
}
// tick labels drop trailing zeros ("5 s", "2.5 s"): the axis's round numbers, in secs' units
function axisSecs(label) { return Object.assign({ label, space: 32, values: (u, v) => v.map((x) => (x === null ? "" : secs(x).replace(/(\.\d*?)0+ /, "$1 ").replace(/\. /, " "))), size: axisSize }, AXIS_FONT); }
// a y axis as wide as its longest tick label (11px text: about 6.5 px a character)
function axisSize(u, values) { return values ? Math.max(44, Math.ceil(Math.max(...values.map((v) => String(v || "").length)) * 6.5) + 16) : 44; }
function axisPct(label) { return Object.assign({ label, space: 32, values: (u, v) => v.map((x) => x + " %"), size: 52 }, AXIS_FONT); }
function vlinesPlugin(getLines) {
  return { hooks: { draw: (u) => {
    const ctx = u.ctx;
    ctx.save();
    for (const [t, color] of getLines()) {
      const x = u.valToPos(t, "x", true);
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.strokeStyle = color; ctx.lineWidth = 1.5 * devicePixelRatio; ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
      ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
    }
    ctx.restore();
  } } };
}

// ---- router -------------------------------------------------------------------------------
function route() {
  for (const t of timers) clearInterval(t);
  timers = [];
  for (const u of charts) u.destroy();
  charts = [];
  setLive(false);
  hideTip();
  const p = location.pathname;
  const parts = p.split("/").filter(Boolean).map(decodeURIComponent);
  const nav = parts[0] || "jobs";
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("on", a.dataset.nav === nav);
  let page;
  if (parts.length === 0) page = jobsPage();
  else if (parts[0] === "jobs" && parts.length === 2) page = jobPage(parts[1]);
  else if (parts[0] === "runs" && parts.length === 1) page = runsPage();
  else if (parts[0] === "runs" && parts.length === 2) page = runPage(parts[1]);
  else if (parts[0] === "console" && parts.length === 1) page = consolesPage();
  else if (parts[0] === "console" && parts.length === 2) page = consolePage(parts[1]);
  else if (parts[0] === "compare") page = comparePage();
  else if (parts[0] === "fleet" && parts.length === 1) page = fleetPage();
  else page = Promise.reject(new Error("no such page"));
  page.catch(failed);
}
document.addEventListener("click", (ev) => {
  const a = ev.target.closest && ev.target.closest("a");
  if (!a || a.target || a.hasAttribute("download") || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
  const u = new URL(a.href, location.href);
  if (u.origin !== location.origin || u.pathname.startsWith("/api/")) return;
  ev.preventDefault();
  history.pushState(null, "", u.pathname + u.search);
  route();
});
window.addEventListener("popstate", route);

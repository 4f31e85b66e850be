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
function secs(s) {
  if (s === null || s === undefined || isNaN(s)) return "–";
  const a = Math.abs(s);
  if (a === 0) return "0 s";
  if (a < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (a < 1) return (s * 1e3).toFixed(1) + " ms";
  if (a < 60) return s.toFixed(2) + " s";
  if (a < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60).toString().padStart(2, "0") + " s";
  if (a < 86400) return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60).toString().padStart(2, "0") + " min";
  return Math.floor(s / 86400) + " d " + Math.round((s % 86400) / 3600) + " h";
}
function when(t) {
  if (t === null || t === undefined) return "–";
  const d = new Date(t * 1000);
  const p = (n) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
}
function clock(t) { return when(t).slice(11); }
function badge(status) { return el("span", { class: "badge b-" + status, "data-status": status, text: status }); }
function card(title, hint, ...kids) {
  return el("section", { class: "card" }, title ? el("h2", { text: title }) : null, hint ? el("div", { class: "hint", text: hint }) : null, ...kids);
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

// ---- colors: one per badput bucket and per timeline phase ----------------------------------
const BUCKET_COLORS = {
  productive: "#22a06b", tpu_initialization: "#f79009", training_prep: "#fdb022",
  program_startup: "#7a5af8", data_loading_sync: "#36bffa", unproductive_checkpoint_save_time: "#2e90fa",
  unproductive_checkpoint_restore_time: "#1849a9", wasted_progress_from_disruption: "#e04f16",
  infrastructure_recovery_from_disruption: "#98a2b3", custom_badput_events: "#ee46bc",
  elastic_slice_down: "#b54708", elastic_scale_up: "#dc6803", elastic_reinitialization: "#93370d",
  stall: "#d92d20", other: "#d0d5dd",
};
const PHASES = {
  init: ["accelerator init", "#f79009"], prep: ["training preparation", "#fdb022"],
  compile: ["compilation (first step)", "#7a5af8"], steps: ["productive steps", "#22a06b"],
  data: ["data loading", "#36bffa"], ckpt_save: ["checkpoint save", "#2e90fa"],
  ckpt_restore: ["checkpoint restore", "#1849a9"], custom: ["evaluation / custom", "#ee46bc"],
  stall: ["stall (hang, straggler)", "#d92d20"], recovery: ["crash and recovery", "#98a2b3"],
  elastic_wait: ["elastic wait", "#b54708"], elastic_reinit: ["elastic re-init", "#93370d"],
};
const FRACTIONS = new Set(["mfu", "step_mfu", "program_goodput", "scheduling_goodput", "runtime_goodput", "ml_productivity_goodput", "ettr", "available_slice_fraction"]);
const LABELS_EXTRA = { mfu: "MFU", ml_productivity_goodput: "ML productivity goodput", ettr: "ETTR", mtbi_s: "MTBI", mttr_s: "MTTR" };
const PALETTE = ["#2463eb", "#e04f16", "#22a06b", "#7a5af8", "#ee46bc", "#0e9384", "#dc6803", "#475467", "#b42318", "#36bffa"];

// ---- charts (uPlot) -----------------------------------------------------------------------
function chartsReady() { return typeof window.uPlot === "function"; }
function plot(container, opts, data) {
  if (!chartsReady()) {
    container.replaceChildren(el("div", { class: "empty", text: "Charts unavailable: the chart files are not built." }));
    return null;
  }
  container.replaceChildren();
  const width = Math.max(300, container.clientWidth || 800);
  const u = new uPlot(Object.assign({ width, height: 240 }, opts), data, container);
  charts.push(u);
  return u;
}
window.addEventListener("resize", () => {
  for (const u of charts) {
    const w = u.root.parentElement ? u.root.parentElement.clientWidth : 0;
    if (w > 0) u.setSize({ width: w, height: u.height });
  }
});
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
function axisSecs() { return { values: (u, v) => v.map((x) => (x === null ? "" : secs(x))), size: 70 }; }
function axisPct() { return { values: (u, v) => v.map((x) => x + " %"), size: 60 }; }
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

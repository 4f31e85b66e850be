// mlgoodput ui: the pages, drawn from the JSON API (/api/...). Every string from the store
// goes into the page through textContent or an attribute, never as HTML.
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

// ---- jobs ---------------------------------------------------------------------------------
async function jobsPage() {
  document.title = "Jobs · mlgoodput";
  const state = { sort: "start", desc: true, q: "", status: "" };
  const tbody = el("tbody");
  const count = el("span", { class: "muted" });
  const search = el("input", { type: "search", placeholder: "Search jobs…", id: "job-search", oninput: (e) => { state.q = e.target.value.toLowerCase(); draw(); } });
  const status = el("select", { id: "job-status", onchange: (e) => { state.status = e.target.value; draw(); } },
    ["", "running", "finished", "stale", "crashed", "loading"].map((s) => el("option", { value: s, text: s || "any status" })));
  const cols = [["job", "Job"], ["status", "Status"], ["start", "Started"], ["wall_s", "Wall time", 1], ["goodput_pct", "Goodput", 1],
    ["last_step", "Last step", 1], ["attempts", "Attempts", 1], ["hosts", "Hosts", 1]];
  const head = el("tr", {}, cols.map(([k, label, n]) => el("th", { class: "sort" + (n ? " num" : ""), "data-key": k, text: label,
    onclick: () => { state.desc = state.sort === k ? !state.desc : k !== "job"; state.sort = k; draw(); } })));
  let rows = [];
  function draw() {
    const shown = rows.filter((r) => (!state.q || r.job.toLowerCase().includes(state.q) || r.logger.toLowerCase().includes(state.q))
      && (!state.status || r.status === state.status));
    shown.sort((a, b) => {
      const x = a[state.sort], y = b[state.sort];
      const c = x === y ? 0 : x === null || x === undefined ? 1 : y === null || y === undefined ? -1 : x < y ? -1 : 1;
      return state.desc ? -c : c;
    });
    count.textContent = shown.length + " of " + rows.length + " jobs";
    tbody.replaceChildren(...shown.map((r) => {
      const href = "/jobs/" + enc(r.job) + (rows.filter((x) => x.job === r.job).length > 1 ? "?logger=" + enc(r.logger) : "");
      return el("tr", { "data-job": r.job },
        el("td", {}, el("a", { href, class: "job-link", text: r.job }), r.logger !== "goodput_" + r.job ? el("span", { class: "muted", text: "  " + r.logger }) : null),
        el("td", {}, badge(r.status)),
        el("td", { text: when(r.start) }),
        el("td", { class: "num", text: r.wall_s === null ? "–" : secs(r.wall_s) }),
        el("td", { class: "num" }, r.goodput_pct === null ? "–" : el("span", {}, el("span", { class: "bar-cell" }, el("i", { style: "width:" + Math.max(0, Math.min(100, r.goodput_pct)) + "%" })), el("span", { class: "goodput", text: pct(r.goodput_pct) }))),
        el("td", { class: "num", text: num(r.last_step, 0) }),
        el("td", { class: "num", text: num(r.attempts, 0) }),
        el("td", { class: "num", text: num(r.hosts, 0) }));
    }));
  }
  const table = el("table", { id: "jobs" }, el("thead", {}, head), tbody);
  const body = el("div", {}, el("div", { class: "tools" }, search, status, count), table);
  $main.replaceChildren(el("h1", { text: "Jobs" }), el("div", { class: "sub" }, el("span", { text: "Every goodput job in the store. Figures are the same accounting as " }, el("code", { text: "mlgoodput report" }))), card(null, null, body));
  async function load() {
    const d = await api("jobs");
    document.getElementById("store").textContent = d.store;
    rows = d.jobs;
    if (!rows.length) { body.replaceChildren(el("div", { class: "empty", text: "No jobs in this store yet. Record one with GoodputRecorder, or run `make demo`." })); return; }
    draw();
    const loading = rows.some((r) => r.status === "loading");
    setLive(loading || rows.some((r) => r.status === "running"));
    if (loading) setTimeout(() => load().catch(() => {}), 300);  // rows still being computed
  }
  await load();
  every(4000, () => load().catch(() => {}));
}

// ---- job ----------------------------------------------------------------------------------
function reportRows(rep, labels) {
  const t = rep.total_s || 1;
  const rows = [["productive", "productive (goodput)", rep.productive_s]];
  for (const [k, v] of Object.entries(rep.badput_s)) {
    if (typeof v === "object" && v !== null) {
      for (const [name, s] of Object.entries(v).sort()) rows.push([k + ":" + name, "custom: " + name, s]);
    } else rows.push([k, labels[k] || k, v]);
  }
  return rows.map(([k, label, s]) => ({ key: k, label, s, pct: 100 * s / t }));
}
function bucketColor(key) { return BUCKET_COLORS[key] || BUCKET_COLORS[key.split(":")[0]] || "#98a2b3"; }

function headlineCard(d) {
  const rep = d.report;
  const rows = reportRows(rep, d.labels);
  const stack = el("div", { class: "stack", id: "stack" }, rows.filter((r) => r.s > 0).map((r) =>
    el("div", { style: "width:" + r.pct + "%;background:" + bucketColor(r.key), "data-bucket": r.key,
      onmousemove: (ev) => showTip(ev, r.label + "\n" + secs(r.s) + "  (" + r.pct.toFixed(2) + " %)"), onmouseleave: hideTip })));
  const showZeros = el("input", { type: "checkbox", id: "zeros" });
  const tbody = el("tbody");
  function drawRows() {
    tbody.replaceChildren(...rows.filter((r) => showZeros.checked || r.s > 0 || r.key === "productive").map((r) =>
      el("tr", { "data-bucket": r.key }, el("td", {}, el("span", { class: "sw", style: "background:" + bucketColor(r.key) }), r.label),
        el("td", { class: "num seconds", text: r.s.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 }) }), el("td", { class: "num pct", text: r.pct.toFixed(2) }))));
  }
  showZeros.addEventListener("change", drawRows);
  drawRows();
  // productivity figures the accounting adds (MFU, the other goodputs, ETTR, MTBI/MTTR) and any
  // other scalar a later version adds: shown as they come, fractions as percentages
  const KNOWN = new Set(["job_name", "logger_name", "start", "end", "total_s", "productive_s", "goodput_pct", "badput_s", "badput_pct",
    "overlapped_s", "disruptions", "last_step", "max_productive_step", "ideal_step_time_s", "slice_efficiency", "hosts", "productivity"]);
  const prod = [];
  for (const [k, v] of Object.entries(rep)) {
    if (KNOWN.has(k) || typeof v !== "number" || !isFinite(v)) continue;
    prod.push(kpi(FRACTIONS.has(k) ? (100 * v).toFixed(2) + " %" : /_s$/.test(k) ? secs(v) : /_pct$/.test(k) ? v.toFixed(2) + " %" : num(v, 3),
      LABELS_EXTRA[k] || k.replace(/_(pct|s)$/, "").replace(/_/g, " ")));
  }
  return card(null, null,
    el("div", { class: "headline" },
      el("div", {}, el("div", { class: "big", id: "goodput" }, rep.goodput_pct.toFixed(2), el("small", { text: " % goodput" })),
        el("div", { class: "muted", text: secs(rep.productive_s) + " productive of " + secs(rep.total_s) })),
      el("div", { class: "kpis" },
        kpi(secs(rep.total_s - rep.productive_s), "badput"), kpi(num(rep.disruptions, 0), "disruptions"),
        kpi(num(rep.last_step, 0), "last step"), kpi(secs(rep.ideal_step_time_s), "ideal step time"),
        kpi(secs((rep.overlapped_s || {}).data_loading_async || 0), "overlapped data loading"),
        rep.slice_efficiency ? kpi(rep.slice_efficiency.stepping.toFixed(1) + " %", "slice efficiency") : null, prod)),
    stack,
    el("div", { class: "tools" }, el("label", {}, showZeros, " show empty buckets")),
    el("table", { id: "breakdown" }, el("thead", {}, el("tr", {}, el("th", { text: "Where the time went" }), el("th", { class: "num", text: "Seconds" }), el("th", { class: "num", text: "%" }))), tbody));
}
function productivityCard(p) {
  if (!p || typeof p !== "object") return null;
  const rows = Object.entries(p).filter(([, v]) => v !== null && v !== undefined && !Array.isArray(v)
    && (typeof v !== "object" || Object.values(v).some((x) => x !== null)));
  const fmt = (k, v) => {
    if (typeof v === "object") return Object.entries(v).filter(([, x]) => x !== null).map(([a, x]) => a.replace(/_s$/, "") + " " + (typeof x === "number" ? (/_s$/.test(a) ? secs(x) : num(x, 3)) : x)).join(", ") || "–";
    if (typeof v !== "number") return String(v);
    if (FRACTIONS.has(k)) return (100 * v).toFixed(2) + " %";
    if (/flops/.test(k)) return v.toExponential(3);  // before "_s": flops per second are no duration
    if (/_time$/.test(k) && v > 1e9) return when(v);  // a UNIX time (the job's submit time)
    if (/_s$/.test(k)) return secs(v);
    return num(v, 3);
  };
  if (!rows.length) return null;
  return card("Productivity", "MFU, program, scheduling and ML productivity goodput, ETTR and reliability, from the same accounting (docs/accounting.md).",
    el("div", { class: "grid2" }, rows.map(([k, v]) => el("div", { class: "kpi", style: "display:flex;justify-content:space-between;border-bottom:1px solid var(--line);padding:4px 0" },
      el("span", { class: "k", text: LABELS_EXTRA[k] || k.replace(/_per_s$/, "/s").replace(/_(s)$/, "").replace(/_/g, " ") }), el("span", { text: fmt(k, v) })))));
}
function kpi(v, k) { return el("div", { class: "kpi", "data-kpi": k }, el("div", { class: "v", text: v }), el("div", { class: "k", text: k })); }

function timelineCard() {
  const box = el("div", { class: "timeline", id: "timeline" });
  const legend = el("div", { class: "legend" });
  return { node: card("Attempt timeline", "One lane per attempt (the lead host) and per host; hover a segment for its times.", box, legend), box, legend };
}
function drawTimeline(tl, box, legend) {
  const W = Math.max(600, box.clientWidth || 1000);
  const laneH = 26, gap = 6, left = 92, right = 10, top = 4;
  const lanes = tl.lanes;
  const axisH = 22;
  const H = top + lanes.length * (laneH + gap) + axisH;
  const s = svg("svg", { viewBox: "0 0 " + W + " " + H, height: H, role: "img" });
  const span = Math.max(tl.end - tl.start, 1e-9);
  const X = (t) => left + (W - left - right) * (t - tl.start) / span;
  const used = new Set();
  lanes.forEach((lane, i) => {
    const y = top + i * (laneH + gap);
    const lab = svg("text", { x: 0, y: y + laneH / 2 + 4, class: "lane-label" });
    lab.textContent = lane.lane;
    s.append(lab);
    s.append(svg("rect", { x: left, y, width: W - left - right, height: laneH, fill: "#f2f4f7", rx: 3 }));
    for (const g of lane.segments) {
      const ph = PHASES[g.phase] || [g.phase, "#98a2b3"];
      used.add(g.phase);
      const x0 = X(g.start), x1 = X(Math.max(g.end, g.start));
      const thin = g.phase === "data";  // often overlaps the steps (asynchronous loading): a strip below them
      const r = svg("rect", { x: x0, y: thin ? y + laneH * 0.62 : y, width: Math.max(1.5, x1 - x0), height: thin ? laneH * 0.38 : laneH, fill: ph[1], class: "seg", "data-phase": g.phase, "data-lane": lane.lane });
      const name = (g.label || ph[0]) + (g.name ? ": " + g.name : "");
      const lines = [name, clock(g.start) + " → " + clock(g.end) + "  (" + secs(g.end - g.start) + ")"];
      if (g.step !== undefined) lines.push("step " + g.step);
      if (g.first_step !== undefined) lines.push("steps " + g.first_step + " … " + g.last_step);
      if (g.n) lines.push(g.n + " merged at this zoom");
      r.addEventListener("mousemove", (ev) => showTip(ev, lines.join("\n")));
      r.addEventListener("mouseleave", hideTip);
      s.append(r);
    }
  });
  const ay = top + lanes.length * (laneH + gap) + 14;
  const ticks = 8;
  for (let k = 0; k <= ticks; k++) {
    const t = tl.start + span * k / ticks;
    const tx = svg("text", { x: Math.min(X(t), W - 50), y: ay, class: "axis", "text-anchor": k === 0 ? "start" : "middle" });
    tx.textContent = span > 86400 ? when(t).slice(5, 16) : clock(t);
    s.append(tx);
  }
  box.replaceChildren(s);
  legend.replaceChildren(...Object.entries(PHASES).filter(([k]) => used.has(k)).map(([, [label, color]]) =>
    el("span", {}, el("span", { class: "sw", style: "background:" + color }), label)),
    tl.hidden_hosts ? el("span", { class: "muted", text: "· " + tl.hidden_hosts + " more hosts not drawn (the lanes above are the lead host and the hosts with the most time beyond the ideal step; every host is in the Hosts table)" }) : "");
}

function table(id, cols, rows, empty) {
  if (!rows.length) return el("div", { class: "empty", text: empty });
  return el("div", { class: "scroll" }, el("table", { id },
    el("thead", {}, el("tr", {}, cols.map(([label, , n]) => el("th", { class: n ? "num" : null, text: label })))),
    el("tbody", {}, rows.map((r) => el("tr", {}, cols.map(([, f, n]) => el("td", { class: n ? "num" : null, text: f(r) })))))));
}

async function jobPage(job) {
  document.title = job + " · mlgoodput";
  delete document.body.dataset.jobReady;
  delete document.body.dataset.goodputComplete;
  const qs = new URLSearchParams(location.search);
  const lq = qs.get("logger") ? "?logger=" + enc(qs.get("logger")) : "";
  const amp = lq ? "&" + lq.slice(1) : "";
  const base = "jobs/" + enc(job);
  // the charts' data is fetched at once, beside the job's (it does not depend on it)
  const wMain = Math.max(600, Math.min(1500, document.documentElement.clientWidth) - 84);
  const firstTimeline = api(base + "/timeline?width=" + wMain + amp);
  const firstSteps = api(base + "/steps?width=" + Math.round(wMain / 2 - 40) + amp);
  firstTimeline.catch(() => {}); firstSteps.catch(() => {});
  let d = await api(base + lq);
  const title = el("h1", { text: job });
  const sub = el("div", { class: "sub" });
  const head = el("div");
  const tlc = timelineCard();
  const gpBox = el("div", { class: "chart", id: "goodput-chart" });
  const stBox = el("div", { class: "chart", id: "steps-chart" });
  let stepHost = "";  // "" = the lead host
  const hostSel = el("select", { id: "step-host", onchange: () => { stepHost = hostSel.value; if (stPlot) { stPlot.destroy(); charts = charts.filter((c) => c !== stPlot); stPlot = null; } loadSteps().catch(() => {}); } });
  function fillHosts() {
    const want = [el("option", { value: "", text: "lead host" })].concat(d.hosts.slice().sort((a, b) => b.lost_s - a.lost_s).slice(0, 50).map((h, i) =>
      el("option", { value: h.host, text: "host " + h.host + (d.straggler && d.straggler.host === h.host ? "  (straggler)" : "") + (i < 3 && h.lost_s > 0 && d.hosts.length > 1 ? "  (" + secs(h.lost_s) + " lost)" : "") })));
    if (hostSel.options.length !== want.length) { hostSel.replaceChildren(...want); hostSel.value = stepHost; }
    hostSel.hidden = d.hosts.length < 2;
  }
  const windows = [[60, "1 min"], [300, "5 min"], [900, "15 min"], [3600, "1 h"], [21600, "6 h"], [86400, "1 day"]];
  let windowS = 60;  // the largest window that is at most a fifth of the job
  for (const [w] of windows) if (w <= d.report.total_s / 5) windowS = w;
  const wsel = el("span", { class: "seg-group" }, windows.map(([w, label]) => el("button", { "data-w": w, class: w === windowS ? "on" : null, text: label,
    onclick: (ev) => { windowS = w; for (const b of wsel.children) b.classList.toggle("on", b === ev.target); if (gpPlot) { gpPlot.destroy(); charts = charts.filter((c) => c !== gpPlot); gpPlot = null; } loadGoodput().catch(() => {}); } })));
  const tables = el("div");
  $main.replaceChildren(title, sub, head, tlc.node,
    el("div", { class: "row" },
      card("Goodput over time", "Cumulative since the job started, and over a rolling window.", el("div", { class: "tools" }, el("span", { class: "muted", text: "rolling window" }), wsel), gpBox),
      card("Step time", "Time between step starts (mean per pixel, band: min…max); red: stalls (steps over 3× the ideal).", el("div", { class: "tools" }, hostSel), stBox)),
    tables);
  let gpPlot = null, stPlot = null, stalls = [];
  // the straggler verdict and its evidence, as the torch analysis states it (docs/torch.md)
  function stragglerText(d) {
    const v = d.straggler_verdict;
    if (!v) return "";
    return d.straggler ? " Straggler: host " + d.straggler.host + ", held the others back " + secs(d.straggler.cost_s) + "; " + v.text + "."
      : " No straggler (" + v.text + ").";
  }
  function drawHead() {
    sub.replaceChildren(badge(d.status), el("span", {}, "logger ", el("b", { text: d.logger })),
      el("span", {}, "started ", el("b", { text: when(d.attempts.length ? d.attempts[0].start : d.report.start) })),
      el("span", {}, "wall time ", el("b", { text: secs(d.report.total_s) })),
      el("span", {}, "attempts ", el("b", { text: d.attempts.length })),
      el("span", {}, "hosts ", el("b", { text: d.hosts.length })),
      el("a", { href: "/console/" + enc(job), text: "console" }),
      el("a", { href: "/compare?job=" + enc(job), text: "compare" }),
      el("a", { href: "/api/" + base + "/report" + lq, text: "report JSON" }));
    head.replaceChildren(headlineCard(d));
    fillHosts();
    const hosts = d.hosts.slice().sort((a, b) => b.lost_s - a.lost_s);
    tables.replaceChildren(
      el("div", { class: "row" },
        card("Attempts", null, table("attempts", [
          ["#", (r) => r.attempt, 1], ["start", (r) => when(r.start)], ["end", (r) => when(r.end)], ["ended", (r) => r.ended],
          ["steps", (r) => num(r.steps, 0), 1], ["first step", (r) => num(r.first_step, 0), 1], ["last step", (r) => num(r.last_step, 0), 1]], d.attempts, "No attempts.")),
        card("Disruptions", "Each crash, as the accounting counts it: when the work stopped, the restart; down: the time until the restart (its infrastructure recovery); until productive: the time until training was productive again (MTTR is its mean).", table("disruptions", [
          ["attempt", (r) => r.attempt, 1], ["work stopped", (r) => clock(r.crashed_at)], ["restarted", (r) => clock(r.restarted_at)],
          ["down", (r) => secs(r.recovery_s), 1],
          ["until productive", (r) => (r.to_recover_s == null ? "not yet" : secs(r.to_recover_s)), 1],
          ["last step", (r) => num(r.last_step, 0), 1], ["resumed at", (r) => num(r.resumed_step, 0), 1]], d.disruptions, "No disruptions."))),
      el("div", { class: "row" },
        card("Hosts", "Step statistics per host (the accounting's), the seconds each spent beyond the ideal step time (most first), how late it started steps on average and the seconds it held the others back." + stragglerText(d), table("hosts", [
          ["host", (r) => r.host, 1], ["steps", (r) => num(r.steps, 0), 1], ["median", (r) => secs(r.median_s), 1], ["p90", (r) => secs(r.p90_s), 1],
          ["max", (r) => secs(r.max_s), 1], ["lost vs ideal", (r) => secs(r.lost_s), 1],
          ["late by", (r) => secs(r.late_s), 1], ["held others back", (r) => secs(r.held_back_s), 1]], hosts, "No steps yet.")),
        card("Checkpoints", "Blocking time of each save and restore" + (d.checkpoints_total > d.checkpoints.length ? " (the latest " + d.checkpoints.length + " of " + num(d.checkpoints_total, 0) + ")." : "."), table("checkpoints", [
          ["kind", (r) => r.kind], ["step", (r) => num(r.step, 0), 1], ["start", (r) => when(r.start)], ["blocking", (r) => secs(r.seconds), 1]], d.checkpoints, "No checkpoints recorded."))),
      productivityCard(d.report.productivity),
      el("div", { class: "row" },
        card("Compilations", "Compile events recorded by the JAX listeners or mlgoodput.torch.", table("compiles", [
          ["time", (r) => when(r.time)], ["host", (r) => r.host, 1], ["function", (r) => r.name || "–"], ["seconds", (r) => secs(r.seconds), 1]], d.compiles, "No compile events.")),
        card("Elastic slices", null, table("slices", [
          ["time", (r) => when(r.time)], ["active", (r) => num(r.active, 0), 1], ["available", (r) => num(r.available, 0), 1], ["total", (r) => num(r.total, 0), 1]], d.slices, "Not an elastic job."))));
    setLive(d.status === "running");
  }
  async function loadTimeline(pre) { drawTimeline(await (pre || api(base + "/timeline?width=" + Math.round(tlc.box.clientWidth || 1200) + amp)), tlc.box, tlc.legend); }
  async function loadSteps(pre) {
    const s = await (pre || api(base + "/steps?width=" + Math.round(stBox.clientWidth || 700) + amp + (stepHost !== "" ? "&host=" + stepHost : "")));
    stalls = s.stalls;
    if (!s.x.length) { stBox.replaceChildren(el("div", { class: "empty", text: "No steps yet." })); stPlot = null; return; }
    const sx = s.x;
    const data = [sx, s.mean, s.min, s.max, sx.map(() => s.ideal_s)];
    const steps = s.step;
    const stepAt = (t) => { let lo = 0, hi = sx.length - 1; while (lo < hi) { const m = (lo + hi + 1) >> 1; if (sx[m] <= t) lo = m; else hi = m - 1; } return steps[lo]; };
    if (stPlot) { stPlot.setData(data); return; }
    // stalls: red dots at their own times, drawn over the chart (not on its x grid)
    const stallDots = { hooks: { draw: (u) => {
      const ctx = u.ctx;
      ctx.save();
      ctx.fillStyle = "#d92d20";
      for (const st of stalls) {
        const x = u.valToPos(st.time, "x", true), y = u.valToPos(st.seconds, "y", true);
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
        ctx.beginPath(); ctx.arc(x, Math.max(u.bbox.top, y), 3.5 * devicePixelRatio, 0, 2 * Math.PI); ctx.fill();
      }
      ctx.restore();
    } } };
    const maxStall = stalls.reduce((m, st) => Math.max(m, st.seconds), 0);
    stPlot = plot(stBox, {
      height: 260,
      series: [{ label: "time", value: (u, v) => v === null ? "–" : clock(v) + "  (step " + stepAt(v) + ")" },
        { label: "step time (mean)", stroke: "#2463eb", width: 1.5, value: (u, v) => secs(v) },
        { label: "min", stroke: "rgba(36,99,235,.25)", value: (u, v) => secs(v) },
        { label: "max", stroke: "rgba(36,99,235,.25)", value: (u, v) => secs(v) },
        { label: "ideal", stroke: "#22a06b", dash: [6, 4], width: 1, value: (u, v) => secs(v) }],
      bands: [{ series: [3, 2], fill: "rgba(36,99,235,.12)" }],
      axes: [{}, axisSecs()],
      scales: { y: { distr: 3, range: (u, lo, hi) => [Math.max(1e-6, (lo || s.ideal_s || 1) * 0.8), Math.max(hi || 0, maxStall) * 1.25] } },
      plugins: [stallDots],
    }, data);
    stBox.append(el("div", { class: "legend", style: "margin-top:4px" }, el("span", {}, el("span", { class: "sw", style: "background:#d92d20;border-radius:50%" }),
      stalls.length + " stall" + (stalls.length === 1 ? "" : "s") + " (steps over " + s.stall_factor + "× the ideal)")));
  }
  async function loadGoodput() {
    const g = await api(base + "/goodput?points=120&window=" + windowS + amp);
    if (!g.x.length) {
      gpBox.replaceChildren(el("div", { class: "empty", text: g.complete ? "No time recorded yet." : "Computing goodput over time…" })); gpPlot = null;
      if (!g.complete) setTimeout(() => loadGoodput().catch(() => {}), 300);  // the pieces are on their way
      return;
    }
    const data = [g.x, g.cumulative, g.rolling.length ? g.rolling : g.x.map(() => null)];
    if (gpPlot) gpPlot.setData(data);
    else gpPlot = plot(gpBox, {
      height: 260,
      series: [{ label: "time", value: (u, v) => v === null ? "–" : when(v) },
        { label: "cumulative", stroke: "#22a06b", width: 2, fill: "rgba(34,160,107,.08)", value: (u, v) => pct(v) },
        { label: "rolling " + (windows.find(([w]) => w === windowS) || [0, secs(g.window_s)])[1], stroke: "#7a5af8", width: 1.5, value: (u, v) => pct(v) }],
      axes: [{ space: 90 }, axisPct()],
      scales: { y: { range: [0, 100] } },
      plugins: [vlinesPlugin(() => d.disruptions.map((x) => [x.crashed_at, "#d92d20"]))],
    }, data);
    if (!g.complete) setTimeout(() => loadGoodput().catch(() => {}), 300);
    else document.body.dataset.goodputComplete = "1";
  }
  drawHead();
  await Promise.all([loadTimeline(firstTimeline), loadSteps(firstSteps)]);
  document.body.dataset.jobReady = "1";
  window.__jobReadyAt = performance.now();  // for bench/bench_ui.py: page start to charts drawn
  loadGoodput().catch(() => {});
  if (d.lag_pending && d.status !== "running" && d.status !== "stale") {
    // a long job's straggler analysis comes from the server's background worker: ask again
    (async () => {
      for (let i = 0; i < 60 && d.lag_pending; i++) {
        await new Promise((ok) => setTimeout(ok, 500));
        try { d = await api(base + lq); } catch (e) { return; }
      }
      drawHead();
      document.body.dataset.lagReady = "1";
    })();
  }
  if (d.status === "running" || d.status === "stale") {
    every(2500, async () => {
      try {
        d = await api(base + lq);
        drawHead();
        await Promise.all([loadTimeline(), loadSteps(), loadGoodput()]);
      } catch (e) { /* the next tick retries */ }
    });
  }
}

// ---- runs ---------------------------------------------------------------------------------
async function runsPage() {
  document.title = "Runs · mlgoodput";
  const d = await api("runs");
  $main.replaceChildren(el("h1", { text: "Runs" }), el("div", { class: "sub", text: "ML runs recorded with machinelearning_run: configs, metrics, system usage and profiles." }),
    card(null, null, d.runs.length ? table("runs", [
      ["run", (r) => r.name], ["group", (r) => r.run_group || "–"], ["started", (r) => when(r.first_time)], ["last event", (r) => when(r.last_time)],
      ["processes", (r) => r.processes, 1], ["metric values", (r) => num(r.metric_values, 0), 1], ["profiles", (r) => r.profile_starts, 1]], d.runs, "")
      : el("div", { class: "empty", text: "No runs in this store." })));
  for (const [i, tr] of Array.from($main.querySelectorAll("#runs tbody tr")).entries()) {
    const td = tr.firstChild;
    td.replaceChildren(el("a", { href: "/runs/" + enc(d.runs[i].name), class: "run-link", text: d.runs[i].name }));
  }
}
function flatten(o, prefix, out) {
  for (const k of Object.keys(o || {}).sort()) {
    const v = o[k];
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) flatten(v, prefix + k + ".", out);
    else out[prefix + k] = JSON.stringify(v);
  }
  return out;
}
async function runPage(name) {
  document.title = name + " · mlgoodput";
  const [d, all] = await Promise.all([api("runs/" + enc(name)), api("runs")]);
  const mine = flatten(d.configs, "", {});
  const cfgBox = el("div");
  const other = el("select", { id: "diff-with" }, el("option", { value: "", text: "compare with…" }),
    all.runs.filter((r) => r.name !== d.name).map((r) => el("option", { value: r.name, text: r.name })));
  let otherRun = null;
  async function drawConfigs() {
    otherRun = other.value ? await api("runs/" + enc(other.value)) : null;
    const theirs = otherRun ? flatten(otherRun.configs, "", {}) : null;
    const keys = Array.from(new Set(Object.keys(mine).concat(theirs ? Object.keys(theirs) : []))).sort();
    if (!keys.length) { cfgBox.replaceChildren(el("div", { class: "empty", text: "No configs." })); return; }
    const onlyDiff = document.getElementById("only-diff");
    cfgBox.replaceChildren(el("div", { class: "scroll" }, el("table", { id: "configs", class: "diff" },
      el("thead", {}, el("tr", {}, el("th", { text: "key" }), el("th", { text: d.name }), theirs ? el("th", { text: other.value }) : null)),
      el("tbody", {}, keys.filter((k) => !(theirs && onlyDiff && onlyDiff.checked) || mine[k] !== theirs[k]).map((k) => {
        const changed = theirs && mine[k] !== theirs[k];
        return el("tr", { class: changed ? "changed" : null }, el("td", { text: k }), el("td", { class: changed ? "changed" : null, text: mine[k] === undefined ? "–" : mine[k] }),
          theirs ? el("td", { class: changed ? "changed" : null, text: theirs[k] === undefined ? "–" : theirs[k] }) : null);
      })))));
  }
  other.addEventListener("change", () => drawConfigs().then(() => drawMetric()).catch(failed));
  const names = Object.keys(d.metrics);
  const msel = el("select", { id: "metric" }, names.map((n) => el("option", { value: n, text: n })));
  const xsel = el("select", { id: "metric-x" }, el("option", { value: "step", text: "by step" }), el("option", { value: "time", text: "by time" }));
  const mBox = el("div", { class: "chart", id: "metric-chart" });
  const sBox = el("div", { id: "system-charts", class: "grid2" });
  function drawMetric() {
    for (const u of charts.splice(0)) u.destroy();
    const m = d.metrics[msel.value];
    if (!m) { mBox.replaceChildren(el("div", { class: "empty", text: "No metrics recorded." })); }
    else {
      const byStep = xsel.value === "step" && !!m.step;
      const ser = byStep ? m.step : m.time;
      const series = [{ label: byStep ? "step" : "time", value: (u, v) => v === null ? "–" : (byStep ? num(v, 0) : when(v)) },
        { label: d.name, stroke: "#2463eb", width: 1.5, spanGaps: true, value: (u, v) => num(v, 6) }];
      let data = [ser.x, ser.y];
      const om = otherRun && otherRun.metrics[msel.value];
      if (om && byStep && om.step) {  // the run picked in "diff with", on the same steps
        const xs = Array.from(new Set(ser.x.concat(om.step.x))).sort((a, b) => a - b);
        const at = (sx, sy) => { const mp = new Map(sx.map((x, i) => [x, sy[i]])); return xs.map((x) => (mp.has(x) ? mp.get(x) : null)); };
        data = [xs, at(ser.x, ser.y), at(om.step.x, om.step.y)];
        series.push({ label: otherRun.name, stroke: "#e04f16", width: 1.5, spanGaps: true, value: (u, v) => num(v, 6) });
      }
      plot(mBox, { series, scales: { x: { time: !byStep } } }, data);
    }
    sBox.replaceChildren();
    Object.entries(d.system_metrics).forEach(([n, sm], i) => {
      const box = el("div", { class: "chart" });
      sBox.append(el("div", {}, el("div", { class: "mini-title", text: n }), box));
      const f = valueFormat(n);
      plot(box, { height: 150, legend: { show: false }, series: [{}, { label: n, stroke: PALETTE[i % PALETTE.length], width: 1.5, fill: PALETTE[i % PALETTE.length] + "18", points: { show: false } }],
        axes: [{ space: 70 }, { size: 70, values: (u, vs) => vs.map(f) }] }, [sm.time.x, sm.time.y]);
    });
    if (!Object.keys(d.system_metrics).length) sBox.replaceChildren(el("div", { class: "empty", text: "No system metrics recorded." }));
  }
  msel.addEventListener("change", drawMetric);
  xsel.addEventListener("change", drawMetric);
  const info = el("div", { class: "sub" }, d.run_group ? el("span", {}, "group ", el("b", { text: d.run_group })) : null,
    el("span", {}, "processes ", el("b", { text: Object.keys(d.system).length || d.starts.length })),
    el("span", {}, "started ", el("b", { text: when(d.starts.length ? d.starts[0].time : null) })),
    d.software && d.software.framework ? el("span", {}, "software ", el("b", { text: d.software.framework + " " + (d.software.framework_version || "") })) : null);
  $main.replaceChildren(el("h1", { text: d.name }), info,
    el("div", { class: "row" },
      card("Metrics", null, el("div", { class: "tools" }, msel, xsel), mBox),
      card("Configs", null, el("div", { class: "tools" }, other, el("label", {}, el("input", { type: "checkbox", id: "only-diff", onchange: () => drawConfigs() }), " only differences")), cfgBox)),
    card("System usage", "Sampled by the run's system metrics (machinelearning_run(log_system_metrics=True)).", sBox),
    el("div", { class: "row" },
      card("Profiles", "Profiler sessions; download the files they wrote.", d.profiles.length ? el("div", { class: "scroll" }, el("table", { id: "profiles" },
        el("thead", {}, el("tr", {}, ["session", "trigger", "started", "seconds", "hosts", "files"].map((h) => el("th", { text: h })))),
        el("tbody", {}, d.profiles.map((p) => el("tr", {}, el("td", { text: p.session }), el("td", { text: p.trigger || "–" }), el("td", { text: when(p.start) }),
          el("td", { class: "num", text: p.complete ? secs(p.duration_s) : "running" }), el("td", { text: p.hosts.join(", ") }),
          el("td", {}, p.files.length ? p.files.map((f, j) => el("a", { href: "/api/runs/" + enc(d.name) + "/profiles/" + p.index + "/" + j, download: "", text: f.split("/").pop(), style: "margin-right:8px" })) : "–"))))))
        : el("div", { class: "empty", text: "No profiles." }))));
  drawMetric();
  await drawConfigs();
}

// ---- console ------------------------------------------------------------------------------
async function consolesPage() {
  document.title = "Console · mlgoodput";
  const d = await api("console");
  $main.replaceChildren(el("h1", { text: "Console" }), el("div", { class: "sub", text: "Logs, progress bars and resource usage that the console server stored." }),
    card(null, null, d.consoles.length ? el("table", { id: "consoles" }, el("thead", {}, el("tr", {}, ["job", "first event", "last event", "records"].map((h, i) => el("th", { class: i === 3 ? "num" : null, text: h })))),
      el("tbody", {}, d.consoles.map((c) => el("tr", {}, el("td", {}, el("a", { href: "/console/" + enc(c.job), text: c.job })), el("td", { text: when(c.first_time) }), el("td", { text: when(c.last_time) }), el("td", { class: "num", text: num(c.events, 0) })))))
      : el("div", { class: "empty", text: "No console jobs in this store." })));
}
async function consolePage(job) {
  document.title = job + " console · mlgoodput";
  const levels = [[0, "all levels"], [10, "DEBUG+"], [20, "INFO+"], [30, "WARNING+"], [40, "ERROR+"]];
  const proc = el("select", { id: "log-process" }, el("option", { value: "", text: "all processes" }));
  const lvl = el("select", { id: "log-level" }, levels.map(([v, t]) => el("option", { value: v, text: t })));
  const text = el("input", { type: "search", id: "log-text", placeholder: "Filter text…" });
  const follow = el("input", { type: "checkbox", id: "follow", checked: "" });
  const logs = el("div", { class: "logs", id: "logs" });
  const lost = el("div", { class: "warn", id: "logs-lost", hidden: "" });
  const bars = el("div", { id: "bars" });
  const uBox = el("div", { class: "chart", id: "usage-chart" });
  let next = -1, marks = [];
  $main.replaceChildren(el("h1", { text: job }), el("div", { class: "sub" }, el("span", { text: "console" }), el("a", { href: "/jobs/" + enc(job), text: "goodput job" })),
    card("Logs", null, el("div", { class: "tools" }, proc, lvl, text, el("label", {}, follow, " follow")), lost, logs),
    el("div", { class: "row" }, card("Progress", null, bars), card("CPU usage", "Per process; dashed lines: checkpoints.", uBox)));
  function reset() { next = -1; logs.replaceChildren(); loadLogs().catch(() => {}); }
  for (const c of [proc, lvl]) c.addEventListener("change", reset);
  text.addEventListener("input", reset);
  async function loadLogs() {
    const q = "after=" + next + "&level=" + lvl.value + (proc.value ? "&process=" + proc.value : "") + (text.value ? "&q=" + enc(text.value) : "");
    const r = await api("console/" + enc(job) + "/logs?" + q);
    lost.hidden = !r.lost;
    lost.textContent = r.lost ? num(r.lost, 0) + " log records of this job were lost (dropped by a client whose buffer was full, or damaged journal records)." : "";
    const known = new Set(Array.from(proc.options).map((o) => o.value));
    for (const p of r.processes) if (!known.has(String(p))) proc.append(el("option", { value: p, text: "process " + p }));
    for (const ln of r.lines) {
      logs.append(el("div", { class: "line l-" + ln.level },
        el("span", { class: "t", text: clock(ln.time) + " " }), el("span", { class: "p", text: "#" + ln.process + " " }),
        el("span", { class: "lv", text: ln.level.padEnd(8) + " " }), el("span", { class: "msg", text: ln.message }),
        ln.exc ? el("div", { class: "exc", text: ln.exc }) : null));
    }
    while (logs.childElementCount > 2000) logs.firstChild.remove();
    next = r.next;
    if (!logs.childElementCount) logs.replaceChildren(el("div", { class: "muted", text: "No log lines match." }));
    if (follow.checked) logs.scrollTop = logs.scrollHeight;
    bars.replaceChildren(...(r.bars.length ? r.bars.map((b) => {
      const frac = b.total ? Math.min(1, b.completed / b.total) : 0;
      return el("div", { class: "progress" }, el("div", {}, el("b", { text: b.desc || b.bar }), el("span", { class: "muted", text: "  #" + b.process + "  " + num(b.completed, 0) + (b.total ? " / " + num(b.total, 0) : "") + (b.done ? "  done" : "") })),
        el("div", { class: "track" }, el("div", { class: "fill", style: "width:" + (100 * frac) + "%" })));
    }) : [el("div", { class: "empty", text: "No progress bars." })]));
  }
  let uPlotRef = null;
  async function loadUsage() {
    const u = await api("console/" + enc(job) + "/usage?width=" + Math.round(uBox.clientWidth || 600));
    marks = u.checkpoints;
    if (!u.processes.length) { uBox.replaceChildren(el("div", { class: "empty", text: "No usage samples (enable them with session(usage=True))." })); return; }
    const xs = Array.from(new Set(u.processes.flatMap((p) => p.cpu.x))).sort((a, b) => a - b);
    const idx = new Map(xs.map((x, i) => [x, i]));
    const data = [xs].concat(u.processes.map((p) => { const ys = xs.map(() => null); p.cpu.x.forEach((x, i) => { ys[idx.get(x)] = p.cpu.y[i]; }); return ys; }));
    if (uPlotRef && uPlotRef.series.length === data.length) { uPlotRef.setData(data); return; }
    uPlotRef = plot(uBox, { series: [{ label: "time", value: (uu, v) => v === null ? "–" : when(v) }].concat(u.processes.map((p, i) => ({ label: "#" + p.process + " CPU", stroke: PALETTE[i % PALETTE.length], spanGaps: true, value: (uu, v) => v === null ? "–" : v.toFixed(1) + " %" }))),
      axes: [{}, axisPct()], plugins: [vlinesPlugin(() => marks.map((m) => [m.time, "#7a5af8"]))] }, data);
  }
  await Promise.all([loadLogs(), loadUsage()]);
  every(2000, () => { if (follow.checked) { loadLogs().catch(() => {}); loadUsage().catch(() => {}); } });
}

// ---- compare ------------------------------------------------------------------------------
async function comparePage() {
  document.title = "Compare · mlgoodput";
  const chosen = new URLSearchParams(location.search).getAll("job");
  const all = await api("jobs");
  const picks = el("div", { class: "check-list" }, all.jobs.map((j) => el("label", {}, el("input", { type: "checkbox", value: j.job, checked: chosen.includes(j.job) ? "" : null,
    onchange: () => { const sel = Array.from(picks.querySelectorAll("input:checked")).map((i) => "job=" + enc(i.value)); history.replaceState(null, "", "/compare" + (sel.length ? "?" + sel.join("&") : "")); draw().catch(failed); } }), " " + j.job)));
  const out = el("div");
  $main.replaceChildren(el("h1", { text: "Compare" }), el("div", { class: "sub", text: "Two or more jobs side by side: goodput, each badput bucket, step time and attempts." }), card("Jobs", null, picks), out);
  async function draw() {
    for (const u of charts.splice(0)) u.destroy();
    const sel = new URLSearchParams(location.search).getAll("job");
    if (!sel.length) { out.replaceChildren(el("div", { class: "card empty", text: "Pick jobs above." })); return; }
    const d = await api("compare?" + sel.map((j) => "job=" + enc(j)).join("&"));
    const rows = {};
    const order = [];
    d.jobs.forEach((j, i) => {
      for (const r of reportRows(j.report, d.labels)) {
        if (!(r.key in rows)) { rows[r.key] = { label: r.label, v: [] }; order.push(r.key); }
        rows[r.key].v[i] = r;
      }
    });
    const head = el("tr", {}, el("th", { text: "" }), d.jobs.map((j) => el("th", { class: "num", text: j.job })));
    const facts = [["goodput", (j) => pct(j.goodput_pct)], ["wall time", (j) => secs(j.wall_s)], ["attempts", (j) => num(j.attempts, 0)],
      ["disruptions", (j) => num(j.disruptions, 0)], ["last step", (j) => num(j.last_step, 0)], ["ideal step time", (j) => secs(j.report.ideal_step_time_s)], ["hosts", (j) => num(j.hosts, 0)]];
    const body = el("tbody", {}, facts.map(([k, f]) => el("tr", {}, el("td", {}, el("b", { text: k })), d.jobs.map((j) => el("td", { class: "num", text: f(j) })))),
      order.filter((k) => rows[k].v.some((r) => r && r.s > 0)).map((k) => el("tr", { "data-bucket": k }, el("td", {}, el("span", { class: "sw", style: "background:" + bucketColor(k) }), rows[k].label),
        d.jobs.map((j, i) => { const r = rows[k].v[i]; return el("td", { class: "num", text: r ? secs(r.s) + "  ·  " + r.pct.toFixed(2) + " %" : "–" }); }))));
    const stacks = d.jobs.map((j) => el("div", { style: "margin-bottom:10px" }, el("div", { text: j.job + "  " + pct(j.goodput_pct) }),
      el("div", { class: "stack", style: "margin:4px 0" }, reportRows(j.report, d.labels).filter((r) => r.s > 0).map((r) => el("div", { style: "width:" + r.pct + "%;background:" + bucketColor(r.key),
        onmousemove: (ev) => showTip(ev, r.label + "\n" + secs(r.s) + " (" + r.pct.toFixed(2) + " %)"), onmouseleave: hideTip })))));
    const sBox = el("div", { class: "chart", id: "compare-steps" });
    out.replaceChildren(card("Where the time went", null, stacks, el("table", { id: "compare" }, el("thead", {}, head), body)),
      card("Step time", "Mean step time against time since each job started.", sBox));
    const rel = d.jobs.map((j) => j.step.x.map((x) => x - (j.step.x[0] || 0)));
    const xs = Array.from(new Set(rel.flat())).sort((a, b) => a - b);
    const idx = new Map(xs.map((x, i) => [x, i]));
    // undefined where a job has no point at another job's x (the line goes on), null at a restart (a gap)
    const data = [xs].concat(d.jobs.map((j, k) => { const ys = xs.map(() => undefined); rel[k].forEach((x, i) => { ys[idx.get(x)] = j.step.mean[i]; }); return ys; }));
    if (xs.length) plot(sBox, { scales: { x: { time: false }, y: { distr: 3 } }, series: [{ label: "since start", value: (u, v) => v === null ? "–" : secs(v) }].concat(d.jobs.map((j, i) => ({ label: j.job, stroke: PALETTE[i % PALETTE.length], value: (u, v) => secs(v) }))),
      axes: [{ space: 90, values: (u, v) => v.map((x) => secs(x)) }, axisSecs()] }, data);
    else sBox.replaceChildren(el("div", { class: "empty", text: "No steps." }));
  }
  await draw();
}

// ---- start --------------------------------------------------------------------------------
function start() {
  if (!chartsReady()) {
    const b = document.getElementById("banner");
    b.hidden = false;
    b.replaceChildren("Charts are unavailable: the chart library was not built into this install. Build it with ", el("code", { text: "make ui-assets" }), " (it runs ", el("code", { text: "npm ci" }), " in js/ and copies uPlot into the package), then reload.");
  }
  api("health").then((h) => { if (h.assets_missing && h.assets_missing.length) { const b = document.getElementById("banner"); b.hidden = false; } }).catch(() => {});
  route();
}
start();

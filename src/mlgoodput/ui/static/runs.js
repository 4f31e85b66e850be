// mlgoodput ui: ML runs: the runs table, one run (every metric, live), compared runs.
// The page state (chosen columns, sort, filter, x axis, smoothing, log axis, zoom window,
// compared runs) lives in the URL, so a page can be shared or reloaded as it is.
"use strict";

// ---- URL state ----------------------------------------------------------------------------
function runsQs() { return new URLSearchParams(location.search); }
function runsSetQs(changes) {  // replace (not push) the page's query with `changes` applied
  const q = runsQs();
  for (const [k, v] of Object.entries(changes)) {
    q.delete(k);
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
    else if (v !== null && v !== undefined && v !== "" && v !== false) q.set(k, v === true ? "1" : v);
  }
  const s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
}
function runsList(q, k) { return (q.get(k) || "").split(",").filter(Boolean); }

// ---- shared -------------------------------------------------------------------------------
function flatten(o, prefix, out) {
  for (const k of Object.keys(o || {}).sort()) {
    const v = o[k];
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) flatten(v, prefix + k + ".", out);
    else out[prefix + k] = JSON.stringify(v);
  }
  return out;
}
function metricOrder(names) {  // loss first, then the other loss-like metrics, then the rest (as the API orders them)
  const rank = (n) => (n.toLowerCase() === "loss" ? 0 : /loss/i.test(n) ? 1 : 2);
  return Array.from(new Set(names)).sort((a, b) => rank(a) - rank(b) || a.toLowerCase().localeCompare(b.toLowerCase()));
}
function metricValue(v) { return v === null || v === undefined ? "–" : Number(v).toLocaleString(undefined, { maximumSignificantDigits: 5 }); }
function shortCommit(g) { return g && g.commit ? g.commit.slice(0, 10) + (g.dirty ? " (dirty)" : "") : null; }
function runWidth() { return Math.max(240, Math.min(1500, document.documentElement.clientWidth) - 96); }
function chartWidth() { const w = runWidth(); return Math.round(w >= 900 ? w / 2 - 24 : w); }

// smoothing: an exponential moving average with TensorBoard's debiasing; gaps stay gaps
function smoothed(ys, w) {
  if (!(w > 0)) return ys;
  let last = 0, n = 0;
  return ys.map((y) => {
    if (y === null || y === undefined || !isFinite(y)) return y === undefined ? undefined : null;
    last = last * w + (1 - w) * y; n += 1;
    return last / (1 - Math.pow(w, n));
  });
}
// one run's series on the chosen axis: step, time (UNIX s) or relative (seconds since the run's start)
function axisOf(series, x, t0) {
  if (!series) return null;
  if (x === "step") return series.step ? { x: series.step.x.slice(), y: series.step.y.slice() } : null;
  const s = series.time;
  return { x: x === "relative" ? s.x.map((t) => t - t0) : s.x.slice(), y: s.y.slice() };
}
// many runs' points on one x: the union of their x values, null where a run has none there
function alignRuns(parts) {
  if (parts.length === 1) return [parts[0].x, parts[0].y];
  const xs = Array.from(new Set(parts.flatMap((p) => p.x))).sort((a, b) => a - b);
  const idx = new Map(xs.map((x, i) => [x, i]));
  return [xs].concat(parts.map((p) => { const ys = xs.map(() => null); p.x.forEach((x, i) => { ys[idx.get(x)] = p.y[i]; }); return ys; }));
}

// ---- metric charts: one per metric, every run of the page on it -----------------------------
// runs: [{name, t0, metrics: {name: {step: {x, y}, time: {x, y}}}}]; view: {x, smooth, log, from, to}
function MetricGrid(box, runs, view, onWindow) {
  this.box = box; this.runs = runs; this.view = view; this.onWindow = onWindow;
  this.tiles = new Map();  // metric -> {el, u}
  this.syncing = false;
}
MetricGrid.prototype.names = function () {
  const f = (this.view.filter || "").toLowerCase();
  return metricOrder(this.runs.flatMap((r) => Object.keys(r.metrics))).filter((n) => !f || n.toLowerCase().includes(f));
};
MetricGrid.prototype.data = function (name) {
  const v = this.view, parts = [];
  for (const r of this.runs) {
    const p = axisOf(r.metrics[name], v.x, r.t0) || { x: [], y: [] };
    if (v.log) p.y = p.y.map((y) => (y === null || y <= 0 ? null : y));
    parts.push(p);
  }
  const aligned = alignRuns(parts);
  const out = [aligned[0]];
  const single = this.runs.length === 1;
  aligned.slice(1).forEach((ys) => {
    if (single && v.smooth > 0) out.push(ys);  // the raw line, faint, under its smoothed one
    out.push(smoothed(ys, v.smooth));
  });
  return out;
};
MetricGrid.prototype.opts = function (name) {
  const v = this.view, single = this.runs.length === 1, self = this;
  const fmtX = v.x === "step" ? (u, x) => (x === null ? "–" : num(x, 0)) : v.x === "time" ? (u, x) => (x === null ? "–" : when(x)) : (u, x) => (x === null ? "–" : secs(x));
  const series = [{ label: v.x === "step" ? "step" : v.x === "time" ? "time" : "since start", value: fmtX }];
  this.runs.forEach((r, i) => {
    const c = PALETTE[i % PALETTE.length];
    const label = single ? name : r.name;
    if (single && v.smooth > 0) series.push({ label: label + " (raw)", stroke: c + "40", width: 1, spanGaps: true, points: { show: false }, value: (u, y) => metricValue(y) });
    series.push({ label: single && v.smooth > 0 ? label + " (smoothed)" : label, stroke: c, width: 1.5, spanGaps: true, points: { show: false }, value: (u, y) => metricValue(y) });
  });
  const xAxis = v.x === "time" ? (typeof axisTime === "function" ? axisTime() : { space: 80 })
    : { space: 70, label: v.x === "step" ? "step" : "time since start", values: (u, vs) => vs.map((x) => (x === null ? "" : v.x === "step" ? num(x, 0) : secs(x))) };
  return {
    height: 220,
    legend: { show: false },  // the values under the cursor go in a tooltip (tip), the colours in the runs table
    cursor: { sync: { key: "runs-metrics" }, drag: { x: true, y: false } },
    scales: { x: { time: v.x === "time" }, y: v.log ? { distr: 3 } : {} },
    series,
    axes: [xAxis, { size: 64, values: (u, vs) => vs.map((y) => (y === null ? "" : metricValue(y))) }],
    hooks: { setScale: [(u, key) => { if (key === "x") self.zoomed(u); }], setCursor: [(u) => self.tip(u, name)] },
  };
};
MetricGrid.prototype.tip = function (u, name) {  // the values at the cursor, one line per series
  const i = u.cursor.idx;
  if (i === null || i === undefined || u.cursor.left < 0) { hideTip(); return; }
  const lines = [name + "  " + u.series[0].label + " " + u.series[0].value(u, u.data[0][i])];
  for (let k = 1; k < u.series.length; k++) {  // a run without a point at this x: its nearest one
    const ys = u.data[k];
    let y = null;
    for (let d = 0; d < 64 && y === null; d++) {
      for (const j of [i - d, i + d]) if (y === null && j >= 0 && j < ys.length && ys[j] !== null && ys[j] !== undefined) y = ys[j];
    }
    if (y !== null) lines.push(u.series[k].label + ": " + metricValue(y));
  }
  const r = u.over.getBoundingClientRect();
  showTip({ clientX: r.left + u.cursor.left, clientY: r.top + u.cursor.top }, lines.join("\n"));
};
MetricGrid.prototype.zoomed = function (u) {  // a drag-zoom on one chart: every chart and the URL follow
  if (this.syncing) return;
  const xs = u.data[0];
  const lo = u.scales.x.min, hi = u.scales.x.max;
  const full = !xs.length || (lo <= xs[0] && hi >= xs[xs.length - 1]);
  this.view.from = full ? null : lo; this.view.to = full ? null : hi;
  this.syncing = true;
  for (const t of this.tiles.values()) if (t.u && t.u !== u) this.window(t.u);
  this.syncing = false;
  if (this.onWindow) this.onWindow();
};
MetricGrid.prototype.window = function (u) {
  const v = this.view;
  if (v.from !== null && v.from !== undefined && v.to !== null && v.to !== undefined) u.setScale("x", { min: v.from, max: v.to });
  else if (u.data[0].length) u.setScale("x", { min: u.data[0][0], max: u.data[0][u.data[0].length - 1] });
};
MetricGrid.prototype.tileInfo = function (tile, name) {
  let count = 0, lastStep = null, last = null;
  for (const r of this.runs) {
    const m = r.metrics[name];
    if (!m) continue;
    count += m.count || 0;
    if (m.step && m.step.x.length) lastStep = Math.max(lastStep === null ? -Infinity : lastStep, m.step.x[m.step.x.length - 1]);
    last = m.last;
  }
  tile.el.dataset.points = count;
  if (lastStep !== null) tile.el.dataset.lastStep = lastStep; else delete tile.el.dataset.lastStep;
  tile.val.textContent = this.runs.length === 1 ? metricValue(last) : "";
};
MetricGrid.prototype.draw = function () {  // everything again (a view setting changed)
  for (const t of this.tiles.values()) if (t.u) { t.u.destroy(); charts = charts.filter((c) => c !== t.u); }
  this.tiles.clear();
  const names = this.names();
  if (!names.length) {
    this.box.replaceChildren(el("div", { class: "empty", text: this.runs.some((r) => Object.keys(r.metrics).length) ? "No metric matches the filter." : "No metrics recorded." }));
    return;
  }
  this.box.replaceChildren();
  for (const name of names) this.addTile(name);
};
MetricGrid.prototype.addTile = function (name) {
  const chart = el("div", { class: "chart", onmouseleave: hideTip });
  const val = el("span", { class: "metric-last" });
  const tile = el("div", { class: "metric-tile", "data-metric": name }, el("div", { class: "metric-head" }, el("span", { class: "mini-title", text: name }), val), chart);
  if (!this.tiles.size) chart.id = "metric-chart";  // the first chart (loss when there is one)
  this.box.append(tile);
  const t = { el: tile, chart, val, u: null };
  this.tiles.set(name, t);
  const data = this.data(name);
  t.u = plot(chart, Object.assign({ width: Math.max(200, chart.clientWidth || chartWidth()) }, this.opts(name)), data);
  if (t.u && this.view.from !== null && this.view.from !== undefined) { this.syncing = true; this.window(t.u); this.syncing = false; }
  this.tileInfo(t, name);
};
MetricGrid.prototype.update = function () {  // new points: the same charts, new data, the zoom window kept
  const names = this.names();
  for (const name of names) {
    const t = this.tiles.get(name);
    if (!t) { if (this.box.querySelector(".empty")) this.box.replaceChildren(); this.addTile(name); continue; }
    if (t.u) {
      this.syncing = true;
      const zoomed = this.view.from !== null && this.view.from !== undefined;
      t.u.setData(this.data(name), !zoomed);
      if (zoomed) this.window(t.u);
      this.syncing = false;
    }
    this.tileInfo(t, name);
  }
};

// append the points of a poll to a run's reduced series (and keep their figures current)
function mergePoints(into, fresh) {
  for (const [k, m] of Object.entries(fresh || {})) {
    const cur = into[k];
    if (!cur) { into[k] = m; continue; }
    for (const ax of ["time", "step"]) {
      if (!m[ax]) continue;
      if (!cur[ax]) cur[ax] = { x: [], y: [] };
      const lastX = cur[ax].x.length ? cur[ax].x[cur[ax].x.length - 1] : -Infinity;
      m[ax].x.forEach((x, i) => {
        if (x >= lastX) { cur[ax].x.push(x); cur[ax].y.push(m[ax].y[i]); }
        else {  // an earlier step again (a restart): in its place
          let j = cur[ax].x.length; while (j > 0 && cur[ax].x[j - 1] > x) j--;
          cur[ax].x.splice(j, 0, x); cur[ax].y.splice(j, 0, m[ax].y[i]);
        }
      });
    }
    cur.count = m.count; cur.last = m.last;
  }
}

// the tools above the charts; `redraw(view)` after a change, the URL updated
function metricTools(view, redraw, extra) {
  const xsel = el("select", { id: "metric-x", "aria-label": "x axis" }, [["step", "by step"], ["time", "by time"], ["relative", "by time since start"]].map(([v, t]) => el("option", { value: v, text: t, selected: view.x === v ? "" : null })));
  const smooth = el("input", { type: "range", id: "smoothing", min: "0", max: "0.99", step: "0.01", value: String(view.smooth || 0), "aria-label": "smoothing" });
  const smoothV = el("span", { class: "num smooth-v", text: (view.smooth || 0).toFixed(2) });
  const log = el("input", { type: "checkbox", id: "log-y", checked: view.log ? "" : null });
  const filter = el("input", { type: "search", id: "metric-filter", placeholder: "filter metrics", value: view.filter || "", "aria-label": "filter metrics" });
  const reset = el("button", { type: "button", id: "reset-zoom", text: "reset zoom", hidden: view.from === null || view.from === undefined ? "" : null });
  const save = () => runsSetQs({ x: view.x === "step" ? null : view.x, smooth: view.smooth ? view.smooth.toFixed(2) : null, log: view.log, metrics: view.filter || null,
    from: view.from === null || view.from === undefined ? null : String(view.from), to: view.to === null || view.to === undefined ? null : String(view.to) });
  xsel.addEventListener("change", () => { view.x = xsel.value; view.from = view.to = null; save(); redraw(); });
  smooth.addEventListener("input", () => { view.smooth = Number(smooth.value); smoothV.textContent = view.smooth.toFixed(2); save(); redraw(); });
  log.addEventListener("change", () => { view.log = log.checked; save(); redraw(); });
  filter.addEventListener("input", () => { view.filter = filter.value.trim(); save(); redraw(); });
  reset.addEventListener("click", () => { view.from = view.to = null; save(); redraw(); });
  const onWindow = () => { reset.hidden = view.from === null || view.from === undefined; save(); };
  return { onWindow, el: el("div", { class: "tools metric-tools" }, filter, xsel,
    el("label", { class: "smooth" }, "smoothing ", smooth, smoothV), el("label", {}, log, " log scale"), reset, extra || null) };
}
function viewFromUrl() {
  const q = runsQs();
  const f = (k) => { const v = q.get(k); return v === null || v === "" || isNaN(Number(v)) ? null : Number(v); };
  const x = ["step", "time", "relative"].includes(q.get("x")) ? q.get("x") : "step";
  return { x, smooth: Math.min(0.99, Math.max(0, f("smooth") || 0)), log: q.get("log") === "1", filter: q.get("metrics") || "", from: f("from"), to: f("to") };
}

// ---- runs table ---------------------------------------------------------------------------
async function runsPage() {
  const cmp = runsQs().getAll("compare").filter(Boolean);
  if (cmp.length) return compareRunsPage(cmp);
  document.title = "Runs · mlgoodput";
  let d = await api("runs");
  if (!d.runs.length) {
    $main.replaceChildren(el("h1", { text: "Runs" }), card(null, null, el("div", { class: "empty" }, "No runs in this store. A training's configs and metrics land here with ", el("code", { text: "machinelearning_run(name=NAME)" }), " and ", el("code", { text: "metrics.record(\"loss\", loss, step=step)" }), " from mlgoodput.diagnostics (or run ", el("code", { text: "make demo" }), ").")));
    return;
  }
  const q = runsQs();
  const selected = new Set(q.getAll("sel"));
  const state = { sort: q.get("sort") || "started", desc: q.get("asc") !== "1", filter: q.get("q") || "",
    metrics: q.has("cols") ? runsList(q, "cols") : null, configs: q.has("cfg") ? runsList(q, "cfg") : null };
  const box = el("div", { class: "runs-scroll" });
  const pickM = el("details", { class: "col-pick", id: "pick-metrics" }, el("summary", { text: "metric columns" }));
  const pickC = el("details", { class: "col-pick", id: "pick-configs" }, el("summary", { text: "config columns" }));
  const filter = el("input", { type: "search", id: "runs-filter", placeholder: "filter: name, group, status, config…", value: state.filter, "aria-label": "filter runs" });
  const cmpBtn = el("button", { type: "button", id: "compare-runs", class: "primary" });
  const save = () => runsSetQs({ sort: state.sort === "started" ? null : state.sort, asc: !state.desc, q: state.filter || null,
    cols: state.metrics === null ? null : state.metrics.join(",") || ",", cfg: state.configs === null ? null : state.configs.join(",") || ",", sel: Array.from(selected) });
  function allMetrics() { return metricOrder(d.runs.flatMap((r) => r.metrics || [])); }
  function flatConfigs(r) { return r._flat || (r._flat = flatten(r.configs, "", {})); }
  function allConfigs() { return Array.from(new Set(d.runs.flatMap((r) => Object.keys(flatConfigs(r))))).sort(); }
  function shownMetrics() { return state.metrics !== null ? state.metrics.filter((m) => allMetrics().includes(m)) : allMetrics().slice(0, 3); }
  function shownConfigs() {
    if (state.configs !== null) return state.configs.filter((k) => allConfigs().includes(k));
    // by default the configs that differ between runs (what a sweep varies), at most 4
    return allConfigs().filter((k) => new Set(d.runs.map((r) => flatConfigs(r)[k])).size > 1).slice(0, 4);
  }
  function picker(details, all, shown, set) {
    details.replaceChildren(details.firstChild, el("div", { class: "col-list" }, all.length ? all.map((n) => el("label", {}, el("input", { type: "checkbox", value: n, checked: shown.includes(n) ? "" : null,
      onchange: () => { set(Array.from(details.querySelectorAll("input:checked")).map((i) => i.value)); save(); draw(); } }), " " + n)) : el("span", { class: "muted", text: "none" })));
  }
  function cols() {
    const c = [
      ["run", "name", (r) => r.name], ["status", "status", (r) => r.status], ["group", "group", (r) => r.run_group || ""],
      ["started", "started", (r) => r.first_time], ["duration", "duration", (r) => r.duration_s, 1],
    ];
    for (const m of shownMetrics()) c.push([m, "m:" + m, (r) => (r.last[m] ? r.last[m].value : null), 1]);
    for (const k of shownConfigs()) c.push([k, "c:" + k, (r) => { const v = flatConfigs(r)[k]; return v === undefined ? null : JSON.parse(v); }, 0]);
    c.push(["user", "user", (r) => r.user || ""], ["commit", "commit", (r) => r.git_commit || ""]);
    return c;
  }
  function matches(r) {
    const f = state.filter.toLowerCase();
    if (!f) return true;
    const hay = [r.name, r.run_group, r.status, r.user, r.git_commit, r.framework].concat(Object.entries(flatConfigs(r)).map(([k, v]) => k + "=" + v)).join(" ").toLowerCase();
    return f.split(/\s+/).every((w) => hay.includes(w));
  }
  function cell(key, v, r) {
    if (key === "name") return el("td", {}, el("a", { href: "/runs/" + enc(r.name), class: "run-link", text: r.name }));
    if (key === "status") return el("td", {}, badge(r.status));
    if (key === "started") return el("td", { class: "nowrap", text: when(v) });
    if (key === "duration") return el("td", { class: "num", text: secs(v) });
    if (key.startsWith("m:")) return el("td", { class: "num", text: metricValue(v), title: r.last[key.slice(2)] && r.last[key.slice(2)].step !== null ? "step " + r.last[key.slice(2)].step : null });
    if (key === "commit") return el("td", { class: "mono", text: r.git_commit ? r.git_commit.slice(0, 10) + (r.git_dirty ? "*" : "") : "–", title: r.git_dirty ? "uncommitted changes" : null });
    if (key.startsWith("c:")) return el("td", { class: typeof v === "number" ? "num" : null, text: v === null ? "–" : typeof v === "string" ? v : JSON.stringify(v) });
    return el("td", { text: v === null || v === "" ? "–" : String(v) });
  }
  function draw() {
    picker(pickM, allMetrics(), shownMetrics(), (v) => { state.metrics = v; });
    picker(pickC, allConfigs(), shownConfigs(), (v) => { state.configs = v; });
    const c = cols();
    const sortCol = c.find((x) => x[1] === state.sort) || c[3];
    const rows = d.runs.filter(matches).slice().sort((a, b) => {
      const va = sortCol[2](a), vb = sortCol[2](b);
      const na = va === null || va === undefined || va === "", nb = vb === null || vb === undefined || vb === "";
      if (na || nb) return na === nb ? 0 : na ? 1 : -1;  // blanks last either way
      const r = typeof va === "number" && typeof vb === "number" ? va - vb : String(va).localeCompare(String(vb), undefined, { numeric: true });
      return state.desc ? -r : r;
    });
    const all = el("input", { type: "checkbox", "aria-label": "select all shown", checked: rows.length && rows.every((r) => selected.has(r.name)) ? "" : null,
      onchange: (ev) => { rows.forEach((r) => (ev.target.checked ? selected.add(r.name) : selected.delete(r.name))); save(); draw(); } });
    const head = el("tr", {}, el("th", { class: "pick" }, all), c.map(([label, key, , n]) => el("th", { class: "sort" + (n ? " num" : ""), "data-sort": key, title: "sort by " + label,
      onclick: () => { if (state.sort === key) state.desc = !state.desc; else { state.sort = key; state.desc = key === "started" || key === "duration"; } save(); draw(); } },
    label + (state.sort === key ? (state.desc ? " ▾" : " ▴") : ""))));
    const body = el("tbody", {}, rows.map((r) => el("tr", { "data-run": r.name, class: selected.has(r.name) ? "picked" : null },
      el("td", { class: "pick" }, el("input", { type: "checkbox", class: "run-pick", value: r.name, "aria-label": "compare " + r.name, checked: selected.has(r.name) ? "" : null,
        onchange: (ev) => { if (ev.target.checked) selected.add(r.name); else selected.delete(r.name); save(); draw(); } })),
      c.map(([, key, f]) => cell(key, f(r), r)))));
    box.replaceChildren(rows.length ? el("table", { id: "runs" }, el("thead", {}, head), body) : el("div", { class: "empty", text: "No run matches the filter." }));
    const n = Array.from(selected).filter((s) => d.runs.some((r) => r.name === s)).length;
    cmpBtn.textContent = n ? "compare " + n + " run" + (n === 1 ? "" : "s") : "compare (tick runs)";
    cmpBtn.disabled = n < 1;
    count.textContent = rows.length === d.runs.length ? d.runs.length + " runs" : rows.length + " of " + d.runs.length + " runs";
  }
  const count = el("span", { class: "muted", id: "runs-count" });
  filter.addEventListener("input", () => { state.filter = filter.value.trim(); save(); draw(); });
  cmpBtn.addEventListener("click", () => {
    const names = Array.from(selected).filter((s) => d.runs.some((r) => r.name === s));
    if (!names.length) return;
    history.pushState(null, "", "/runs?" + names.map((n) => "compare=" + enc(n)).join("&"));
    route();
  });
  $main.replaceChildren(el("h1", { text: "Runs" }), el("div", { class: "sub", text: "ML runs recorded with machinelearning_run. Tick runs to compare them; click a heading to sort." }),
    card(null, null, el("div", { class: "tools runs-tools" }, filter, pickM, pickC, cmpBtn, count), box));
  draw();
  document.body.dataset.runsReady = "1";
  let busy = false;
  every(5000, async () => {  // statuses, durations and last values move while runs run
    if (busy || document.hidden) return;
    busy = true;
    try { d = await api("runs"); draw(); } catch (e) { /* the next tick tries again */ } finally { busy = false; }
  });
}

// ---- one run ------------------------------------------------------------------------------
function provenanceRows(d) {
  const p = d.provenance || {}, g = p.git || {}, sw = d.software || {}, info = d.info || {};
  const rows = [
    ["command", p.command], ["git commit", g.commit ? g.commit + (g.dirty ? " (uncommitted changes)" : g.dirty === false ? " (clean)" : "") : null],
    ["git branch", g.branch], ["repository", g.root], ["working directory", p.cwd], ["host", p.host], ["user", p.user],
    ["python", p.python || sw.python_version], ["framework", sw.framework ? sw.framework + " " + (sw.framework_version || "") : null],
    ["packages", Object.entries(p.versions || sw.packages || {}).map(([k, v]) => k + " " + v).join(", ") || null],
    ["project", info.project], ["region", info.region], ["environment", info.environment], ["workload id", info.workload_id], ["profile directory", info.profile_dir],
  ];
  return rows.filter(([, v]) => v !== null && v !== undefined && v !== "");
}
async function runLinks(d) {  // the goodput job and console of the same training, when the store holds them
  if (d.links) return d.links;
  const base = d.info && d.info.base_name ? d.info.base_name : d.name;
  const [jobs, cons] = await Promise.all([api("jobs").catch(() => ({ jobs: [] })), api("console").catch(() => ({ consoles: [] }))]);
  return { job: jobs.jobs.some((j) => j.job === base) ? "/jobs/" + enc(base) : null, console: cons.consoles.some((c) => c.job === base) ? "/console/" + enc(base) : null };
}
function runHeader(d, links) {
  const p = d.provenance || {}, sw = d.software || {};
  const status = el("span", { id: "run-status" }, badge(d.status));
  const dur = el("b", { id: "run-duration", text: secs(d.duration_s) });
  const commit = shortCommit(p.git);
  const linkEls = [["job", "goodput job"], ["console", "console"]].filter(([k]) => links && links[k]).map(([k, t]) => el("a", { href: links[k], "data-link": k, text: t }));
  const sub = el("div", { class: "sub run-sub" },
    status,
    d.run_group ? el("span", {}, "group ", el("b", { text: d.run_group })) : null,
    el("span", {}, "started ", el("b", { text: when(d.starts.length ? d.starts[0].time : d.first_time) })),
    el("span", {}, "duration ", dur),
    p.host ? el("span", {}, "host ", el("b", { text: p.host })) : null,
    p.user ? el("span", {}, "user ", el("b", { text: p.user })) : null,
    commit ? el("span", {}, "commit ", el("b", { class: "mono", text: commit, title: p.git.commit })) : null,
    sw.framework ? el("span", {}, "framework ", el("b", { text: sw.framework + " " + (sw.framework_version || "") })) : null,
    el("span", {}, "processes ", el("b", { text: Object.keys(d.system).length || d.starts.length })),
    linkEls.length ? el("span", { class: "run-links" }, linkEls) : null);
  return { h1: el("h1", { text: d.name }), sub, status, dur };
}
function configTable(runs, onlyDiff) {
  const flats = runs.map((r) => flatten(r.configs, "", {}));
  const keys = Array.from(new Set(flats.flatMap((f) => Object.keys(f)))).sort();
  if (!keys.length) return el("div", { class: "empty", text: "No configs." });
  const many = runs.length > 1;
  const shown = keys.filter((k) => !(many && onlyDiff) || new Set(flats.map((f) => f[k])).size > 1);
  if (!shown.length) return el("div", { class: "empty", text: "The runs' configs are the same." });
  return el("div", { class: "scroll" }, el("table", { id: "configs", class: "diff" },
    el("thead", {}, el("tr", {}, el("th", { text: "key" }), runs.map((r, i) => el("th", {}, many ? el("span", { class: "sw", style: "background:" + PALETTE[i % PALETTE.length] }) : null, many ? r.name : "value")))),
    el("tbody", {}, shown.map((k) => {
      const changed = many && new Set(flats.map((f) => f[k])).size > 1;
      return el("tr", { class: changed ? "changed" : null, "data-key": k }, el("td", { text: k }), flats.map((f) => el("td", { class: changed ? "changed" : null, text: f[k] === undefined ? "–" : f[k] })));
    }))));
}
function systemCharts(box, d) {
  box.replaceChildren();
  const names = Object.keys(d.system_metrics || {});
  if (!names.length) { box.replaceChildren(el("div", { class: "empty", text: "No system metrics recorded." })); return; }
  names.forEach((n, i) => {
    const c = el("div", { class: "chart" });
    box.append(el("div", { class: "metric-tile", "data-system": n }, el("div", { class: "mini-title", text: n }), c));
    const sm = d.system_metrics[n], f = valueFormat(n);
    plot(c, { width: Math.max(200, c.clientWidth || chartWidth()), height: 150, legend: { show: false },
      series: [{}, { label: n, stroke: PALETTE[i % PALETTE.length], width: 1.5, fill: PALETTE[i % PALETTE.length] + "18", points: { show: false } }],
      axes: [typeof axisTime === "function" ? axisTime() : { space: 80 }, { size: 64, values: (u, vs) => vs.map(f) }] }, [sm.time.x, sm.time.y]);
  });
}
async function runPage(name) {
  document.title = name + " · mlgoodput";
  delete document.body.dataset.runReady;
  let d = await api("runs/" + enc(name) + "?width=" + chartWidth());
  const links = await runLinks(d);
  const view = viewFromUrl();
  const run = { name: d.name, t0: d.first_time || 0, metrics: d.metrics };
  const mBox = el("div", { class: "metric-grid", id: "metric-charts" });
  const grid = new MetricGrid(mBox, [run], view, () => tools.onWindow());
  const csv = el("a", { href: "/api/runs/" + enc(d.name) + "/csv", download: "", id: "csv", text: "CSV" });
  const tools = metricTools(view, () => grid.draw(), csv);
  grid.onWindow = tools.onWindow;
  const sBox = el("div", { class: "metric-grid", id: "system-charts" });
  // a card with nothing to show is not drawn: shown once the run samples its system
  const sCard = card("System usage", "Sampled by the run's system metrics (machinelearning_run(log_system_metrics=True)).", sBox);
  sCard.hidden = !Object.keys(d.system_metrics || {}).length;
  const head = runHeader(d, links);
  const prov = provenanceRows(d);
  $main.replaceChildren(head.h1, head.sub,
    card("Metrics", null, tools.el, mBox),
    el("div", { class: "row" },
      card("Configs", null, configTable([d], false)),
      card("Provenance", "Recorded when the run started.", prov.length ? el("div", { class: "runs-scroll" }, el("table", { id: "provenance", class: "kv" }, el("tbody", {}, prov.map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: String(v) })))))) : el("div", { class: "empty", text: "No provenance recorded (a run from an older mlgoodput, or provenance=False)." }))),
    // a card with nothing to show is not drawn (no profiles; system usage waits hidden for samples)
    sCard,
    d.profiles.length ? card("Profiles", "Profiler sessions; download the files they wrote.", el("div", { class: "scroll" }, el("table", { id: "profiles" },
      el("thead", {}, el("tr", {}, ["session", "trigger", "started", "duration", "hosts", "files"].map((h) => el("th", { text: h })))),
      el("tbody", {}, d.profiles.map((p) => el("tr", {}, el("td", { text: p.session }), el("td", { text: p.trigger || "–" }), el("td", { text: when(p.start) }),
        el("td", { class: "num", text: p.complete ? secs(p.duration_s) : "running" }), el("td", { text: p.hosts.join(", ") }),
        el("td", {}, p.files.length ? p.files.map((f, j) => el("a", { href: "/api/runs/" + enc(d.name) + "/profiles/" + p.index + "/" + j, download: "", text: f.split("/").pop(), style: "margin-right:8px" })) : "–")))))))
      : null);
  grid.draw();
  systemCharts(sBox, d);
  document.body.dataset.runReady = "1";
  mBox.dataset.cursor = d.cursor;

  // live: ask for what the run stored after our cursor; the cost is what is new
  let cursor = d.cursor, busy = false, live = d.status === "running";
  setLive(live);
  const here = location.pathname;
  let ticks = 0;
  async function poll() {
    ticks++;
    if (busy || document.hidden || location.pathname !== here) return;
    if (!live && ticks % 15) return;  // a run that stopped is looked at every 15 s (it may resume)
    busy = true;
    try {
      const p = await api("runs/" + enc(d.name) + "/points?after=" + cursor);
      // far more points here than the charts are wide (a long live session): reduced again
      const grown = Object.values(run.metrics).some((m) => (m.time ? m.time.x.length : 0) > 8 * chartWidth());
      if (p.reset || grown) {  // too much is new (or the server restarted): load the run again
        d = await api("runs/" + enc(name) + "?width=" + chartWidth());
        run.metrics = d.metrics; cursor = d.cursor;
        grid.draw(); sCard.hidden = !Object.keys(d.system_metrics || {}).length; systemCharts(sBox, d);
      } else if (p.cursor !== cursor) {
        mergePoints(run.metrics, p.metrics);
        mergePoints(d.system_metrics, p.system_metrics);
        cursor = p.cursor;
        grid.update();
        if (Object.keys(p.system_metrics).length) { sCard.hidden = false; systemCharts(sBox, d); }
      }
      mBox.dataset.cursor = cursor;
      head.status.replaceChildren(badge(p.status));
      head.dur.textContent = secs(p.duration_s);
      live = p.status === "running";
      setLive(live);
    } catch (e) { /* the next tick tries again */ } finally { busy = false; }
  }
  every(1000, poll);
}

// ---- compared runs ------------------------------------------------------------------------
async function compareRunsPage(names) {
  document.title = "Compare runs · mlgoodput";
  delete document.body.dataset.runReady;
  const got = await Promise.all(names.map((n) => api("runs/" + enc(n) + "?width=" + chartWidth()).catch((e) => ({ name: n, error: String(e.message || e) }))));
  const ok = got.filter((d) => !d.error);
  const view = viewFromUrl();
  const runs = ok.map((d) => ({ name: d.name, t0: d.first_time || 0, metrics: d.metrics }));
  const mBox = el("div", { class: "metric-grid", id: "metric-charts" });
  const grid = new MetricGrid(mBox, runs, view, null);
  const tools = metricTools(view, () => grid.draw());
  grid.onWindow = tools.onWindow;
  const q = runsQs();
  const onlyDiff = el("input", { type: "checkbox", id: "only-diff", checked: q.get("diff") !== "0" ? "" : null });
  const cfgBox = el("div");
  const drawCfg = () => cfgBox.replaceChildren(configTable(ok, onlyDiff.checked));
  onlyDiff.addEventListener("change", () => { runsSetQs({ diff: onlyDiff.checked ? null : "0" }); drawCfg(); });
  const remove = (n) => { const rest = names.filter((x) => x !== n); history.pushState(null, "", "/runs" + (rest.length ? "?" + rest.map((x) => "compare=" + enc(x)).join("&") : "")); route(); };
  const metricNames = metricOrder(ok.flatMap((d) => Object.keys(d.metrics)));
  const summary = el("div", { class: "scroll" }, el("table", { id: "compare-runs" },
    el("thead", {}, el("tr", {}, ["run", "status", "started", "duration", "commit", "user"].map((h) => el("th", { text: h })), metricNames.slice(0, 6).map((m) => el("th", { class: "num", text: m })), el("th", { text: "" }))),
    el("tbody", {}, ok.map((d, i) => el("tr", { "data-run": d.name },
      el("td", {}, el("span", { class: "sw", style: "background:" + PALETTE[i % PALETTE.length] }), el("a", { href: "/runs/" + enc(d.name), text: d.name })),
      el("td", {}, badge(d.status)), el("td", { text: when(d.first_time) }), el("td", { class: "num", text: secs(d.duration_s) }),
      el("td", { class: "mono", text: shortCommit((d.provenance || {}).git) || "–" }), el("td", { text: (d.provenance || {}).user || "–" }),
      metricNames.slice(0, 6).map((m) => el("td", { class: "num", text: metricValue(d.metrics[m] ? d.metrics[m].last : null) })),
      el("td", {}, el("button", { type: "button", class: "link", title: "remove from the comparison", text: "remove", onclick: () => remove(d.name) })))))));
  const missing = got.filter((d) => d.error);
  $main.replaceChildren(el("h1", { text: "Compare runs" }),
    el("div", { class: "sub" }, el("span", {}, el("b", { text: ok.length }), " runs"), el("a", { href: "/runs", text: "← all runs" })),
    ...(missing.length ? [el("div", { class: "card err", text: missing.map((d) => d.name + ": " + d.error).join("; ") })] : []),
    card("Runs", null, summary),
    card("Metrics", "Every run on each metric's chart; drag across a chart to zoom all of them.", tools.el, mBox),
    card("Configs", null, el("div", { class: "tools" }, el("label", {}, onlyDiff, " only differences")), cfgBox));
  grid.draw();
  drawCfg();
  document.body.dataset.runReady = "1";
}

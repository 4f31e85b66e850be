// mlgoodput ui: the jobs list and one job's page.
"use strict";

// ---- jobs ---------------------------------------------------------------------------------
async function jobsPage() {
  document.title = "Jobs · mlgoodput";
  const state = { sort: "start", desc: true, q: "", status: "" };
  const tbody = el("tbody");
  const count = el("span", { class: "muted" });
  const search = el("input", { type: "search", placeholder: "Search jobs…", id: "job-search", oninput: (e) => { state.q = e.target.value.toLowerCase(); draw(); } });
  const status = el("select", { id: "job-status", onchange: (e) => { state.status = e.target.value; draw(); } },
    ["", "running", "finished", "stale", "crashed", "loading"].map((s) => el("option", { value: s, text: s || "any status" })));
  const cols = [["job", "Job"], ["goodput_pct", "Goodput", 1], ["status", "Status"], ["wall_s", "Wall time", 1], ["start", "Started"],
    ["last_step", "Last step", 1], ["attempts", "Attempts", 1], ["hosts", "Hosts", 1]];  // goodput second: a phone shows it
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
        el("td", { class: "num" }, r.goodput_pct === null ? "–" : el("span", { class: "lvl-" + goodputLevel(r.goodput_pct) }, el("span", { class: "bar-cell" }, el("i", { style: "width:" + Math.max(0, Math.min(100, r.goodput_pct)) + "%" })), el("span", { class: "goodput", text: pct(r.goodput_pct) }))),
        el("td", {}, badge(r.status)),
        el("td", { class: "num", text: r.wall_s === null ? "–" : secs(r.wall_s) }),
        el("td", { text: when(r.start) }),
        el("td", { class: "num", text: num(r.last_step, 0) }),
        el("td", { class: "num", text: num(r.attempts, 0) }),
        el("td", { class: "num", text: num(r.hosts, 0) }));
    }));
  }
  const table = el("table", { id: "jobs" }, el("thead", {}, head), tbody);
  const body = el("div", {}, el("div", { class: "tools" }, search, status, count), el("div", { class: "scroll full" }, table));
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
      el("tr", { "data-bucket": r.key }, el("td", { class: "label" }, el("span", { class: "sw", style: "background:" + bucketColor(r.key) }), r.label),
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
    prod.push(kpi(FRACTIONS.has(k) ? (100 * v).toFixed(2) + " %" : /flops_per_s$/.test(k) ? flops(v) : /_s$/.test(k) ? secs(v) : /_pct$/.test(k) ? v.toFixed(2) + " %" : num(v, 3),
      LABELS_EXTRA[k] || k.replace(/_(pct|s)$/, "").replace(/_/g, " ")));
  }
  return card(null, null,
    el("div", { class: "headline" },
      el("div", {}, el("div", { class: "big lvl-" + goodputLevel(rep.goodput_pct), id: "goodput", "data-level": goodputLevel(rep.goodput_pct) }, rep.goodput_pct.toFixed(2), el("small", { text: " % goodput" })),
        el("div", { class: "muted", text: secs(rep.productive_s) + " productive of " + secs(rep.total_s) })),
      evenGrid(el("div", { class: "kpis" },
        kpi(secs(rep.total_s - rep.productive_s), "badput"), kpi(num(rep.disruptions, 0), "disruptions"),
        kpi(num(rep.last_step, 0), "last step"), kpi(secs(rep.ideal_step_time_s), "ideal step time"),
        kpi(secs((rep.overlapped_s || {}).data_loading_async || 0), "overlapped data loading"),
        rep.slice_efficiency ? kpi(rep.slice_efficiency.stepping.toFixed(1) + " %", "slice efficiency") : null, prod), 128)),
    stack,
    el("div", { class: "tools" }, el("label", {}, showZeros, " show empty buckets")),
    el("div", { class: "scroll full" }, el("table", { id: "breakdown" }, el("thead", {}, el("tr", {}, el("th", { text: "Where the time went" }), el("th", { class: "num", text: "Seconds" }), el("th", { class: "num", text: "%" }))), tbody)));
}
function productivityCard(p) {
  if (!p || typeof p !== "object") return null;
  const rows = Object.entries(p).filter(([, v]) => v !== null && v !== undefined && !Array.isArray(v)
    && (typeof v !== "object" || (Object.values(v).some((x) => x !== null) && v.count !== 0)));  // "count 0": nothing to show
  const fmt = (k, v) => {
    if (typeof v === "object") return Object.entries(v).filter(([, x]) => x !== null).map(([a, x]) => a.replace(/_s$/, "") + " " + (typeof x === "number" ? (/_s$/.test(a) ? secs(x) : num(x, 3)) : x)).join(", ") || "–";
    if (typeof v !== "number") return String(v);
    if (FRACTIONS.has(k)) return (100 * v).toFixed(2) + " %";
    if (/flops_per_s$/.test(k)) return flops(v);  // before "_s": flops per second are no duration
    if (/flops/.test(k)) return flops(v, "FLOP");  // a count (per step)
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
  return { node: card("Attempt timeline", "The breakdown above laid out in time: one lane per attempt (the lead host, whose events the accounting follows), every second in the colour of the bucket the report counts it in. Host lanes show when each host stepped. Hover for times.", box, legend), box, legend };
}
// the order in which a piece of several buckets (narrower than a pixel each) is drawn
const BUCKET_ORDER = Object.keys(BUCKET_COLORS);
function bucketRank(key) { const i = BUCKET_ORDER.indexOf(key.split(":")[0]); return i < 0 ? BUCKET_ORDER.length : i; }
function bucketLabel(key, labels) {
  if (key === "productive") return "productive";
  const [k, name] = key.split(":");
  return name !== undefined ? "custom: " + name : (labels[k] || k);
}
// the lanes' drawn width in a box this wide: the server reduces the timeline to its pixels
function laneLeft(w) { return w < 500 ? 64 : 92; }
function laneWidth(w) { return Math.max(50, Math.round(Math.max(200, w) - laneLeft(w) - 10)); }
function drawTimeline(tl, box, legend) {
  const labels = tl.labels || {};
  const W = Math.max(200, box.clientWidth || 1000);
  const laneH = 26, gap = 6, left = laneLeft(W), right = 10, top = 4;
  const lanes = tl.lanes;
  const axisH = 38;
  const H = top + lanes.length * (laneH + gap) + axisH;
  const s = svg("svg", { viewBox: "0 0 " + W + " " + H, height: H, role: "img" });
  const span = Math.max(tl.end - tl.start, 1e-9);
  const X = (t) => left + (W - left - right) * (t - tl.start) / span;
  const used = new Set();
  let hostLanes = false;
  const tip = (r, lines) => { r.addEventListener("mousemove", (ev) => showTip(ev, lines.join("\n"))); r.addEventListener("mouseleave", hideTip); };
  lanes.forEach((lane, i) => {
    const y = top + i * (laneH + gap);
    const lab = svg("text", { x: 0, y: y + laneH / 2 + 4, class: "lane-label" });
    lab.textContent = lane.lane;
    s.append(lab);
    s.append(svg("rect", { x: left, y, width: W - left - right, height: laneH, fill: "#f2f4f7", rx: 3 }));
    for (const g of lane.segments) {
      const when2 = clock(g.start) + " → " + clock(g.end) + "  (" + secs(g.end - g.start) + ")";
      if (lane.kind === "host") {  // when the host stepped: not part of the partition
        hostLanes = true;
        const r = svg("rect", { x: X(g.start), y: y + laneH * 0.3, width: Math.max(1, X(g.end) - X(g.start)), height: laneH * 0.4, fill: "#98a2b3", class: "host-seg", "data-lane": lane.lane });
        tip(r, [lane.lane + " stepping", when2, "steps " + g.first_step + " … " + g.last_step]);
        s.append(r);
        continue;
      }
      // one bucket, or a piece narrower than a pixel per bucket: each bucket's seconds side by side
      const parts = g.mix ? Object.entries(g.mix).sort((p, q) => bucketRank(p[0]) - bucketRank(q[0]) || (p[0] < q[0] ? -1 : 1)) : [[g.bucket, g.end - g.start]];
      const lines = g.mix ? [g.n + " pieces narrower than a pixel", when2].concat(parts.map(([b, sec]) => bucketLabel(b, labels) + ": " + secs(sec)))
        : [bucketLabel(g.bucket, labels), when2];
      let t = g.start;
      for (const [b, sec] of parts) {
        used.add(b);
        const r = svg("rect", { x: X(t), y, width: Math.max(0, X(t + sec) - X(t)), height: laneH, fill: bucketColor(b), class: "seg", "data-bucket": b, "data-seconds": sec, "data-lane": lane.lane });
        tip(r, lines);
        s.append(r);
        t += sec;
      }
    }
  });
  const ay = top + lanes.length * (laneH + gap) + 14;
  const ticks = Math.max(2, Math.min(8, Math.floor((W - left) / 110)));
  for (let k = 0; k <= ticks; k++) {
    const t = tl.start + span * k / ticks;
    const tx = svg("text", { x: X(t), y: ay, class: "axis", "text-anchor": k === 0 ? "start" : k === ticks ? "end" : "middle" });
    // ticks under two seconds apart show tenths (twelve ticks of one second would repeat)
    tx.textContent = span > 86400 ? when(t).slice(5, 16) : span / ticks < 2 ? clock(t) + "." + Math.floor((t * 10) % 10) : clock(t);
    s.append(tx);
  }
  const title = svg("text", { x: left + (W - left - right) / 2, y: ay + 15, class: "axis", "text-anchor": "middle" });
  title.textContent = "time (UTC)";
  s.append(title);
  box.replaceChildren(s);
  const order = [...used].sort((p, q) => bucketRank(p) - bucketRank(q) || (p < q ? -1 : 1));
  legend.replaceChildren(...order.map((b) => el("span", { "data-bucket": b }, el("span", { class: "sw", style: "background:" + bucketColor(b) }), bucketLabel(b, labels))),
    hostLanes ? el("span", {}, el("span", { class: "sw", style: "background:#98a2b3" }), "host stepping (not in the breakdown)") : "",
    tl.hidden_hosts ? el("span", { class: "muted", text: "· " + tl.hidden_hosts + " more hosts not drawn (the lanes above are the lead host and the hosts with the most time beyond the ideal step; every host is in the Hosts table)" }) : "");
}

function table(id, cols, rows, empty) {
  if (!rows.length) return el("div", { class: "empty", text: empty });
  return el("div", { class: "scroll" }, el("table", { id },
    el("thead", {}, el("tr", {}, cols.map(([label, , n]) => el("th", { class: n ? "num" : null, text: label })))),
    el("tbody", {}, rows.map((r) => el("tr", {}, cols.map(([, f, n]) => el("td", { class: n ? "num" : null, text: f(r) })))))));
}

// the other pages of the same training (the API's `links`): only those the store holds
const LINK_LABELS = { job: "goodput job", run: "ML run", console: "console" };
function pageLinks(links, here) {
  return Object.entries(LINK_LABELS).filter(([k]) => k !== here && links && links[k]).map(([k, text]) => el("a", { href: links[k], "data-link": k, text }));
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
  const firstTimeline = api(base + "/timeline?width=" + laneWidth(Math.min(1500, document.documentElement.clientWidth) - 84) + amp);
  const firstSteps = api(base + "/steps?width=" + Math.round(wMain / 2 - 40) + amp);
  firstTimeline.catch(() => {}); firstSteps.catch(() => {});
  let d = await api(base + lq);
  const title = el("h1", { text: job });
  const sub = el("div", { class: "sub" });
  const head = el("div");
  const tlc = timelineCard();
  const gpBox = el("div", { class: "chart", id: "goodput-chart" });
  const gpErr = el("div", { class: "warn", id: "goodput-error", hidden: true });  // goodput over time that failed
  const jobErr = el("div", { class: "warn", id: "job-errors", hidden: true });  // the job's background work that failed
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
  $main.replaceChildren(title, sub, jobErr, head, tlc.node,
    el("div", { class: "row" },
      card("Goodput over time", "Cumulative since the job started, and over a rolling window.", el("div", { class: "tools" }, el("span", { class: "muted", text: "rolling window" }), wsel), gpErr, gpBox),
      card("Step time", "Time between step starts (mean per pixel, band: min…max); red: the steps that hold the report's stall time (hover the timeline for where it lies).", el("div", { class: "tools" }, hostSel), stBox)),
    tables);
  let gpPlot = null, stPlot = null, stalls = [];
  // the straggler verdict and its evidence, as the torch analysis states it (docs/torch.md)
  function stragglerText(d) {
    const v = d.straggler_verdict;
    if (!v) return "";
    return d.straggler ? " Straggler: host " + d.straggler.host + ", held the others back " + secs(d.straggler.cost_s) + "; " + v.text + "."
      : " No straggler (" + v.text + ").";
  }
  // current failures of the server's background work for this job (counted; the last one
  // said): a bug shows as this note, not as an empty chart; a kind that succeeded since is past
  function errorText(errors, only) {
    const kinds = Object.keys(errors || {}).filter((k) => (!only || k === only) && errors[k].current);
    return kinds.map((k) => k + " failed " + errors[k].count + (errors[k].count === 1 ? " time" : " times") + (errors[k].last ? ": " + errors[k].last : "")).join("; ");
  }
  function showErrors(box, text) { box.textContent = text; box.hidden = !text; }
  function drawHead() {
    // goodput over time's own failures are said on its chart
    showErrors(jobErr, errorText(Object.fromEntries(Object.entries(d.errors || {}).filter(([k]) => k !== "goodput"))));
    sub.replaceChildren(badge(d.status), el("span", {}, "logger ", el("b", { text: d.logger })),
      el("span", {}, "started ", el("b", { text: when(d.attempts.length ? d.attempts[0].start : d.report.start) })),
      el("span", {}, "wall time ", el("b", { text: secs(d.report.total_s) })),
      el("span", {}, "attempts ", el("b", { text: d.attempts.length })),
      el("span", {}, "hosts ", el("b", { text: d.hosts.length })),
      ...pageLinks(d.links, "job"),
      el("a", { href: "/compare?job=" + enc(job), text: "compare" }),
      el("a", { href: "/api/" + base + "/report" + lq, text: "report JSON" }));
    head.replaceChildren(headlineCard(d));
    fillHosts();
    const hosts = d.hosts.slice().sort((a, b) => b.lost_s - a.lost_s);
    // a card with nothing to show is not drawn (a job without checkpoints has no Checkpoints card)
    const tcard = (title, hint, id, cols, rows, wide) => rows.length ? el("section", { class: "card" + (wide ? " wide" : ""), "data-card": id },
      el("h2", { text: title }), hint ? el("div", { class: "hint", text: hint }) : null, table(id, cols, rows, "")) : null;
    tables.replaceChildren(
      el("div", { class: "row" },
        tcard("Attempts", null, "attempts", [
          ["attempt", (r) => r.attempt, 1], ["start", (r) => when(r.start)], ["end", (r) => when(r.end)], ["ended", (r) => r.ended],
          ["steps", (r) => num(r.steps, 0), 1], ["first step", (r) => num(r.first_step, 0), 1], ["last step", (r) => num(r.last_step, 0), 1]], d.attempts, true),
        tcard("Disruptions", "Each crash, as the accounting counts it: when the work stopped, the restart (UTC); down: the time until the restart (its infrastructure recovery); until productive: the time until training was productive again (MTTR is its mean).", "disruptions", [
          ["attempt", (r) => r.attempt, 1], ["work stopped", (r) => clock(r.crashed_at)], ["restarted", (r) => clock(r.restarted_at)],
          ["down", (r) => secs(r.recovery_s), 1],
          ["until productive", (r) => (r.to_recover_s == null ? "not yet" : secs(r.to_recover_s)), 1],
          ["last step", (r) => num(r.last_step, 0), 1], ["resumed at", (r) => num(r.resumed_step, 0), 1]], d.disruptions),
        tcard("Hosts", "Step statistics per host (the accounting's), the time each spent beyond the ideal step time (most first), how late it started steps on average and the time it held the others back." + stragglerText(d), "hosts", [
          ["host", (r) => r.host, 1], ["steps", (r) => num(r.steps, 0), 1], ["median", (r) => secs(r.median_s), 1], ["p90", (r) => secs(r.p90_s), 1],
          ["max", (r) => secs(r.max_s), 1], ["lost vs ideal", (r) => secs(r.lost_s), 1],
          ["late by", (r) => secs(r.late_s), 1], ["held others back", (r) => secs(r.held_back_s), 1]], hosts, true),
        tcard("Checkpoints", "Blocking time of each save and restore" + (d.checkpoints_total > d.checkpoints.length ? " (the latest " + d.checkpoints.length + " of " + num(d.checkpoints_total, 0) + ")." : "."), "checkpoints", [
          ["kind", (r) => r.kind], ["step", (r) => num(r.step, 0), 1], ["start", (r) => when(r.start)], ["blocking", (r) => secs(r.seconds), 1]], d.checkpoints),
        tcard("Compilations", "Compile events recorded by the JAX listeners or mlgoodput.torch.", "compiles", [
          ["time", (r) => when(r.time)], ["host", (r) => r.host, 1], ["function", (r) => r.name || "–"], ["duration", (r) => secs(r.seconds), 1]], d.compiles),
        tcard("Elastic slices", "Slice counts the job recorded.", "slices", [
          ["time", (r) => when(r.time)], ["active", (r) => num(r.active, 0), 1], ["available", (r) => num(r.available, 0), 1], ["total", (r) => num(r.total, 0), 1]], d.slices)),
      productivityCard(d.report.productivity) || "");
    fitScrolls(tables);
    setLive(d.status === "running");
  }
  async function loadTimeline(pre) { drawTimeline(await (pre || api(base + "/timeline?width=" + laneWidth(tlc.box.clientWidth || 1200) + amp)), tlc.box, tlc.legend); }
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
      series: [{ label: "time (UTC)", value: (u, v) => v === null ? "–" : clock(v) + "  (step " + stepAt(v) + ")" },
        { label: "step time (mean)", stroke: "#2463eb", width: 1.5, value: (u, v) => secs(v) },
        { label: "min", stroke: "rgba(36,99,235,.25)", value: (u, v) => secs(v) },
        { label: "max", stroke: "rgba(36,99,235,.25)", value: (u, v) => secs(v) },
        { label: "ideal", stroke: "#22a06b", dash: [6, 4], width: 1, value: (u, v) => secs(v) }],
      bands: [{ series: [3, 2], fill: "rgba(36,99,235,.12)" }],
      axes: [axisTime(), axisSecs("step time (log scale)")],
      // a log scale's ends on its own ticks (uPlot.rangeLog): its tick loop never ends from 0.0965
      scales: { y: { distr: 3, range: (u, lo, hi) => { const a = Math.max(1e-6, (lo || s.ideal_s || 1) * 0.8); return uPlot.rangeLog(a, Math.max(hi || 0, maxStall, a) * 1.25, 10, false); } } },
      plugins: [stallDots],
    }, data);
    stBox.append(el("div", { class: "legend", style: "margin-top:4px" }, el("span", {}, el("span", { class: "sw", style: "background:#d92d20;border-radius:50%" }),
      stalls.length + " step" + (stalls.length === 1 ? "" : "s") + " holding the report's stall" + (s.host === undefined || stalls.length || stepHost === "" ? "" : " (counted on the lead host only)"))));
  }
  async function loadGoodput() {
    const g = await api(base + "/goodput?points=120&window=" + windowS + amp);
    const failed = errorText(g.errors, "goodput");
    showErrors(gpErr, failed);
    const again = failed ? 5000 : 300;  // a failing computation is asked for again, slowly
    if (!g.x.length) {
      gpBox.replaceChildren(el("div", { class: "empty", text: g.complete ? "No time recorded yet." : failed ? "Goodput over time could not be computed." : "Computing goodput over time…" })); gpPlot = null;
      if (!g.complete) setTimeout(() => loadGoodput().catch(() => {}), again);  // the pieces are on their way
      return;
    }
    const data = [g.x, g.cumulative, g.rolling.length ? g.rolling : g.x.map(() => null)];
    if (gpPlot) gpPlot.setData(data);
    else gpPlot = plot(gpBox, {
      height: 260,
      series: [{ label: "time", value: (u, v) => v === null ? "–" : when(v) },
        { label: "cumulative", stroke: "#22a06b", width: 2, fill: "rgba(34,160,107,.08)", value: (u, v) => pct(v) },
        { label: "rolling " + (windows.find(([w]) => w === windowS) || [0, secs(g.window_s)])[1], stroke: "#7a5af8", width: 1.5, value: (u, v) => pct(v) }],
      axes: [axisTime(), axisPct("goodput (%)")],
      scales: { y: { range: [0, 100] } },
      plugins: [vlinesPlugin(() => d.disruptions.map((x) => [x.crashed_at, "#d92d20"]))],
    }, data);
    if (!g.complete) setTimeout(() => loadGoodput().catch(() => {}), again);
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

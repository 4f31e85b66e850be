// mlgoodput ui: the fleet page (/fleet): where the store's accelerator hours went over a time
// range, by group, by UTC day and by job. Every number on it is one of /api/fleet's, the
// FleetReport that `mlgoodput fleet --json` prints: the page formats and draws them and adds
// nothing up itself. Each drawn bar and table cell carries its number exactly (data-v, data-hours).
"use strict";

// ---- the command's formats (_cli/fleet.py): hours "1,234.5" from 10 up, "9.25" below; "12.3 %"
// a number to d decimals as Python's format() gives it ("{:,.2f}"): an exact tie rounds to even
function fixedPy(x, d, plain) {  // plain: no thousands separators
  const a = Math.abs(x), tie = a * 2 ** (d + 1);
  let s;
  if (Number.isInteger(tie) && tie % 2 === 1 && a < 2 ** 40) {  // a = odd / 2^(d+1): exactly halfway
    let n = (tie * 5 ** d - 1) / 2;  // a * 10^d - 1/2, an integer
    if (n % 2 === 1) n += 1;
    s = String(n).padStart(d + 1, "0");
    s = d ? s.slice(0, -d) + "." + s.slice(-d) : s;
  } else s = a.toFixed(d);
  const [whole, frac] = s.split(".");
  const grouped = plain ? whole : whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return (x < 0 || Object.is(x, -0) ? "-" : "") + grouped + (frac === undefined ? "" : "." + frac);
}
function fleetHours(h) { return h === null || h === undefined ? "–" : fixedPy(h, h >= 10 ? 1 : 2); }
function fleetPct(v) { return v === null || v === undefined ? "–" : fixedPy(100 * v, 1, true) + " %"; }
function fleetMoney(v, cur) { return v === null || v === undefined || !cur ? "–" : fixedPy(v, 2) + " " + cur; }
function groupName(k) { return k === null || k === undefined ? "(none)" : String(k); }
function dayOf(t) { return when(t).slice(0, 10); }  // the UTC date of a time, "2026-11-27"

// a table cell carrying its number: data-key names the report's key, data-v its exact value
function fcell(key, v, text, cls) {
  return el("td", { class: "num" + (cls ? " " + cls : ""), "data-key": key, "data-v": v === null || v === undefined ? "" : String(v), text });
}
// the parts of a row to draw: productive, then each badput bucket in the report's order
function fleetParts(row, buckets, labels) {
  const parts = [{ key: "productive", label: "productive (goodput)", h: row.productive_hours }];
  for (const b of buckets) parts.push({ key: b, label: labels[b] || b, h: (row.badput_hours || {})[b] || 0 });
  return parts;
}
function worstBuckets(row, buckets, labels, n) {  // the row's largest badput buckets, as words
  const got = buckets.map((b) => [(row.badput_hours || {})[b] || 0, b]).filter(([h]) => h > 0)
    .sort((p, q) => q[0] - p[0] || (p[1] < q[1] ? 1 : -1)).slice(0, n || 2);
  // a bucket's hours never wrap away from its name: "checkpoint save 42.7 h" (no-break spaces)
  return got.map(([h, b]) => (labels[b] || b) + "\u00a0" + fleetHours(h) + "\u00a0h").join(", ") || "–";
}
function partsTip(title, row, parts) {
  return [title, fleetHours(row.accelerator_hours) + " accelerator-hours, goodput " + fleetPct(row.goodput)]
    .concat(parts.filter((p) => p.h > 0).map((p) => p.label + ": " + fleetHours(p.h) + " h")).join("\n");
}

// one horizontal bar: its segments' widths are their hours over `scale` (the widest row's hours)
function stackBar(row, parts, scale, title) {
  const fill = el("div", { class: "fb-fill", style: "width:" + (scale > 0 ? 100 * row.accelerator_hours / scale : 0) + "%" },
    parts.filter((p) => p.h > 0).map((p) => el("div", { class: "fb-seg", "data-bucket": p.key, "data-hours": String(p.h),
      style: "width:" + (row.accelerator_hours > 0 ? 100 * p.h / row.accelerator_hours : 0) + "%;background:" + bucketColor(p.key) })));
  fill.addEventListener("mousemove", (ev) => showTip(ev, partsTip(title, row, parts)));
  fill.addEventListener("mouseleave", hideTip);
  return el("div", { class: "fb-track" }, fill);
}

// ---- the page -----------------------------------------------------------------------------
async function fleetPage() {
  document.title = "Fleet · mlgoodput";
  const params = new URLSearchParams(location.search);
  const state = {
    since: params.get("since") || "", until: params.get("until") || "", by: params.get("by") || "team",
    price: params.get("price_per_hour") || "", all: params.get("all") === "1",
  };
  const TOP = 500;  // job rows asked for unless every job is
  let d = null;
  const sinceIn = el("input", { type: "date", id: "fleet-since", "aria-label": "from (UTC)" });
  const untilIn = el("input", { type: "date", id: "fleet-until", "aria-label": "to (UTC, the whole day)" });
  const bySel = el("select", { id: "fleet-by", "aria-label": "group by" });
  const priceIn = el("input", { type: "number", min: "0", step: "any", id: "fleet-price", placeholder: "none", "aria-label": "price of one accelerator-hour" });
  priceIn.value = state.price;
  const last7 = el("button", { type: "button", id: "fleet-last7", text: "Last 7 days" });
  const range = el("div", { class: "sub", id: "fleet-range" });
  const err = el("div", { class: "warn", id: "fleet-error", hidden: true });
  const body = el("div", { id: "fleet-body" }, el("p", { class: "muted", text: "Loading…" }));
  $main.replaceChildren(el("h1", { text: "Fleet" }),
    el("div", { class: "sub" }, el("span", { text: "Where the store's accelerator hours went, each job weighted by its accelerators: the accounting of " }, el("code", { text: "mlgoodput fleet" }), el("span", { text: " (docs/fleet.md)." }))),
    el("div", { class: "tools fleet-tools" },
      el("label", {}, el("span", { class: "muted", text: "from " }), sinceIn),
      el("label", {}, el("span", { class: "muted", text: "to " }), untilIn),
      last7,
      el("label", {}, el("span", { class: "muted", text: "by " }), bySel),
      el("label", {}, el("span", { class: "muted", text: "price per accelerator-hour " }), priceIn)),
    range, err, body);

  function query() {  // the API's query (the page's own URL holds the same parameters)
    const q = new URLSearchParams();
    if (state.since) q.set("since", state.since);
    if (state.until) q.set("until", state.until);
    q.set("by", state.by);
    if (state.price) q.set("price_per_hour", state.price);
    return q;
  }
  function changed() {
    const q = query();
    if (state.all) q.set("all", "1");
    history.replaceState(null, "", "/fleet?" + q.toString());
    load(true).catch(() => {});
  }
  sinceIn.addEventListener("change", () => { state.since = sinceIn.value; changed(); });
  // the "to" day is taken whole: the range ends at the next UTC midnight
  untilIn.addEventListener("change", () => {
    state.until = untilIn.value ? dayOf(Date.parse(untilIn.value + "T00:00:00Z") / 1000 + 86400) : "";
    changed();
  });
  bySel.addEventListener("change", () => { state.by = bySel.value; changed(); });
  priceIn.addEventListener("change", () => { state.price = priceIn.value.trim(); changed(); });
  last7.addEventListener("click", () => { state.since = ""; state.until = ""; changed(); });

  let lastW = 0;
  const resized = new ResizeObserver((entries) => {
    const box = entries[0].target;
    if (!box.isConnected || !d || box.clientWidth === lastW) return;
    lastW = box.clientWidth;
    drawDays(box, d);
  });
  let seq = 0;
  // asked: a new question (not a refresh): when it fails, the figures of the last one go
  async function load(asked) {
    const mine = ++seq;
    const q = query();
    if (!state.all) q.set("top", String(TOP));
    let got;
    try {
      got = await api("fleet?" + q.toString());
    } catch (e) {
      if (mine !== seq || !body.isConnected) return;
      err.textContent = String(e.message || e);
      err.hidden = false;
      document.body.dataset.fleetError = err.textContent;
      if (asked) { d = null; body.replaceChildren(); }
      return;
    }
    if (mine !== seq || !body.isConnected) return;  // a newer question was asked meanwhile, or the page left
    err.hidden = true;
    delete document.body.dataset.fleetError;
    // the same figures as drawn (a range of finished jobs): nothing to redraw
    const same = d !== null && sameReport(d, got);
    d = got;
    document.getElementById("store").textContent = d.store;
    if (same) drawControls();  // the range's times only
    else draw();
    setLive(!state.until && d.jobs.some((j) => j.status === "running"));
    document.body.dataset.fleetReady = String(mine);
  }
  function drawControls() {
    if (document.activeElement !== sinceIn) sinceIn.value = dayOf(d.since);
    if (document.activeElement !== untilIn) untilIn.value = dayOf(d.until - 1e-3);  // the last day in the range
    const keys = new Set(["team", "job", d.by]);
    for (const k of d.label_keys || []) keys.add(k);  // every job's, not only the rows sent
    const want = [...keys].sort();
    if ([...bySel.options].map((o) => o.value).join("\n") !== want.join("\n")) {
      bySel.replaceChildren(...want.map((k) => el("option", { value: k, text: k === "job" ? "job (each its own)" : k })));
    }
    bySel.value = d.by;
    range.replaceChildren(el("span", {}, el("b", { text: when(d.since) }), " to ", el("b", { text: when(d.until) })),
      el("span", {}, "by ", el("b", { text: d.by })),
      d.currency ? el("span", {}, "priced at ", el("b", { text: state.price + " " + d.currency }), " an accelerator-hour") : "");
  }
  function sameReport(a, b) {
    const strip = (x) => JSON.stringify(Object.assign({}, x, { now: 0, until: 0, days: x.days.map((y) => Object.assign({}, y, { end: 0 })) }));
    return dayOf(a.until - 1e-3) === dayOf(b.until - 1e-3) && strip(a) === strip(b);
  }
  function draw() {
    drawControls();
    const labels = d.labels || {}, buckets = d.buckets;
    const t = d.total;
    if (!t.jobs) {
      body.replaceChildren(card(null, null, el("div", { class: "empty", id: "fleet-empty", text: "No job ran in this range. Record jobs with labels (docs/fleet.md), or widen the range." })));
      return;
    }
    const priced = !!d.currency;
    const kept = ["fleet-jobs-box", "fleet-groups-box"].map((id) => document.getElementById(id)).filter(Boolean).map((b) => [b.id, b.scrollTop, b.scrollLeft]);
    // ---- totals
    const kp = (key, v, text, k) => el("div", { class: "kpi", "data-key": key, "data-v": v === null || v === undefined ? "" : String(v) }, el("div", { class: "v", text }), el("div", { class: "k", text: k }));
    const gp = t.goodput === null ? null : 100 * t.goodput;
    const totalParts = fleetParts(t, buckets, labels);
    const used = new Set(totalParts.filter((p) => p.h > 0).map((p) => p.key));
    const totals = card(null, null,
      el("div", { class: "headline", id: "fleet-total" },
        el("div", {}, el("div", { class: "big lvl-" + goodputLevel(gp), id: "fleet-goodput", "data-v": t.goodput === null ? "" : String(t.goodput) }, fleetPct(t.goodput).replace(" %", ""), el("small", { text: " % goodput" })),
          el("div", { class: "muted", text: fleetHours(t.productive_hours) + " productive of " + fleetHours(t.accelerator_hours) + " accelerator-hours" })),
        evenGrid(el("div", { class: "kpis" },
          kp("jobs", t.jobs, num(t.jobs, 0), "jobs"),
          kp("accelerator_hours", t.accelerator_hours, fleetHours(t.accelerator_hours), "accelerator-hours"),
          kp("lost_hours", t.lost_hours, fleetHours(t.lost_hours), "hours lost"),
          kp("queue_hours", t.queue_hours, fleetHours(t.queue_hours), "hours queued"),
          kp("scheduling_goodput", t.scheduling_goodput, fleetPct(t.scheduling_goodput), "scheduling goodput"),
          kp("program_goodput", t.program_goodput, fleetPct(t.program_goodput), "program goodput"),
          kp("ml_productivity_goodput", t.ml_productivity_goodput, fleetPct(t.ml_productivity_goodput), "ML productivity goodput"),
          kp("ettr", t.ettr, fleetPct(t.ettr), "ETTR"),
          priced ? kp("cost.total", t.cost.total, fleetMoney(t.cost.total, d.currency), "cost") : null,
          priced ? kp("cost.lost", t.cost.lost, fleetMoney(t.cost.lost, d.currency), "cost of hours lost") : null), 128)),
      el("div", { class: "fleet-total-bar" }, stackBar(t, totalParts, t.accelerator_hours, "all jobs")));
    // ---- a stacked bar per group (most hours lost first, as the report orders them)
    const scale = Math.max(0, ...d.groups.map((g) => g.accelerator_hours));
    const MAX_BARS = 40;  // by job over a big fleet: the groups that lost the most (every one is in the table)
    const bars = el("div", { class: "fleet-bars", id: "fleet-groups" }, d.groups.slice(0, MAX_BARS).map((g) => {
      const parts = fleetParts(g, buckets, labels);
      for (const p of parts) if (p.h > 0) used.add(p.key);
      return el("div", { class: "fleet-bar", "data-group": groupName(g.key), "data-v": String(g.accelerator_hours) },
        el("div", { class: "fb-label", title: groupName(g.key), text: groupName(g.key) }),
        stackBar(g, parts, scale, d.by + " " + groupName(g.key)),
        el("div", { class: "fb-value" }, el("b", { text: fleetHours(g.accelerator_hours) + " h" }), " · " + fleetPct(g.goodput)));
    }));
    // ---- per day
    const dayBox = el("div", { class: "fleet-days", id: "fleet-days" });
    for (const day of d.days) for (const p of fleetParts(day, buckets, labels)) if (p.h > 0) used.add(p.key);
    const order = ["productive", ...buckets].filter((k) => used.has(k));
    const legend = () => el("div", { class: "legend" }, order.map((k) => el("span", { "data-bucket": k }, el("span", { class: "sw", style: "background:" + bucketColor(k) }), k === "productive" ? "productive (goodput)" : labels[k] || k)));
    // ---- tables
    const gcols = ["group", "jobs", "accel-hours", "goodput", "lost h", "scheduling", "program", "MPG", "ETTR"].concat(priced ? ["cost", "lost (" + d.currency + ")"] : [], ["where it went"]);
    const numCol = (c) => !["group", "where it went"].includes(c);
    const grow = (g, name, cls) => el("tr", { "data-group": name, class: cls || null },
      el("td", { class: "label", text: name }),
      fcell("jobs", g.jobs, num(g.jobs, 0)),
      fcell("accelerator_hours", g.accelerator_hours, fleetHours(g.accelerator_hours)),
      fcell("goodput", g.goodput, fleetPct(g.goodput)),
      fcell("lost_hours", g.lost_hours, fleetHours(g.lost_hours)),
      fcell("scheduling_goodput", g.scheduling_goodput, fleetPct(g.scheduling_goodput)),
      fcell("program_goodput", g.program_goodput, fleetPct(g.program_goodput)),
      fcell("ml_productivity_goodput", g.ml_productivity_goodput, fleetPct(g.ml_productivity_goodput)),
      fcell("ettr", g.ettr, fleetPct(g.ettr)),
      priced ? fcell("cost.total", g.cost && g.cost.total, fleetMoney(g.cost && g.cost.total, d.currency)) : null,
      priced ? fcell("cost.lost", g.cost && g.cost.lost, fleetMoney(g.cost && g.cost.lost, d.currency)) : null,
      el("td", { class: "where", text: worstBuckets(g, buckets, labels) }));
    const groupTable = el("div", { class: d.groups.length > 20 ? "scroll" : "scroll full", id: "fleet-groups-box" }, el("table", { id: "fleet-group-table" },
      el("thead", {}, el("tr", {}, gcols.map((c) => el("th", { class: numCol(c) ? "num" : null, text: c })))),
      el("tbody", {}, d.groups.map((g) => grow(g, groupName(g.key))), grow(t, "all", "total"))));
    const jcols = ["job", d.by === "job" ? null : d.by, "status", "accelerators", "accel-hours", "goodput", "lost h"].filter(Boolean).concat(priced ? ["lost (" + d.currency + ")"] : [], ["where it went"]);
    const jobRows = d.jobs.map((j) => el("tr", { "data-job": j.job, "data-logger": j.logger },
      el("td", { class: "label" }, el("a", { href: j.link, class: "job-link", text: j.job }), j.logger !== "goodput_" + j.job ? el("span", { class: "muted", text: "  " + j.logger }) : null),
      d.by === "job" ? null : el("td", { class: "group", text: groupName(j.group) }),
      el("td", {}, badge(j.status)),
      fcell("accelerators", j.accelerators, num(j.accelerators, 0) + (j.accelerators_recorded ? "" : "?") + (j.accelerator_type ? " " + j.accelerator_type : "")),
      fcell("accelerator_hours", j.accelerator_hours, fleetHours(j.accelerator_hours)),
      fcell("goodput", j.goodput, fleetPct(j.goodput)),
      fcell("lost_hours", j.lost_hours, fleetHours(j.lost_hours)),
      priced ? fcell("cost.lost", j.cost && j.cost.lost, fleetMoney(j.cost && j.cost.lost, d.currency)) : null,
      el("td", { class: "where", text: worstBuckets(j, buckets, labels) })));
    const more = d.jobs_total !== undefined && d.jobs_total > d.jobs.length;
    const jobsHint = "Most hours lost first; each links to its job page. Hours are accelerator-hours inside the range." +
      (d.jobs.some((j) => !j.accelerators_recorded) ? " ? accelerators not recorded: counted as 1." : "");
    body.replaceChildren(totals,
      card("By " + d.by, "Accelerator-hours of each " + (d.by === "job" ? "job" : "value of the label " + d.by) + ", productive and each badput bucket; most hours lost first." +
        (d.by === "job" ? "" : " (none): jobs without the label.") +
        (d.groups.length > MAX_BARS ? " The " + MAX_BARS + " of " + num(d.groups.length, 0) + " that lost the most; every one is in the table below." : ""), bars, legend()),
      card("Per day (UTC)", "Accelerator-hours each day: productive and each badput bucket.", dayBox, legend()),
      card("Groups", null, groupTable),
      card("Jobs", jobsHint,
        el("div", { class: "scroll", id: "fleet-jobs-box" }, el("table", { id: "fleet-jobs" },
          el("thead", {}, el("tr", {}, jcols.map((c) => el("th", { class: ["job", "status", "where it went", d.by].includes(c) ? null : "num", text: c })))),
          el("tbody", {}, jobRows))),
        more ? el("div", { class: "tools", style: "margin-top:8px" }, el("span", { class: "muted", text: "the " + d.jobs.length + " of " + num(d.jobs_total, 0) + " jobs that lost the most" }),
          el("button", { type: "button", id: "fleet-all", text: "show all " + num(d.jobs_total, 0), onclick: () => { state.all = true; changed(); } })) : null));
    drawDays(dayBox, d);
    // the day chart is drawn to its box's width: again when that changes (a turned phone)
    resized.disconnect();
    lastW = dayBox.clientWidth;
    resized.observe(dayBox);
    fitScrolls(body);
    for (const [id, top, left] of kept) {  // the tables stay where they were scrolled to
      const box = document.getElementById(id);
      if (box) { box.scrollTop = top; box.scrollLeft = left; }
    }
  }
  // ---- goodput and badput hours per day: stacked columns, one per UTC day of the range
  function drawDays(box, rep) {
    const labels = rep.labels || {}, buckets = rep.buckets;
    const W = Math.max(240, box.clientWidth || 800), H = W < 500 ? 200 : 240;
    const left = 52, right = 8, top = 8, bottom = 42;
    const byDay = new Map(rep.days.map((x) => [x.day, x]));
    let slots = [];
    const first = Math.floor(rep.since / 86400), last = Math.ceil(rep.until / 86400) - 1;
    if (last - first < 400) for (let k = first; k <= last; k++) slots.push(dayOf(k * 86400));
    else slots = rep.days.map((x) => x.day);  // a long range: only the days with hours
    const heights = rep.days.map((x) => Math.max(x.accelerator_hours, fleetParts(x, buckets, labels).reduce((s, p) => s + p.h, 0)));
    const hi = niceCeil(Math.max(0, ...heights));
    const s = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img" });
    const plotW = W - left - right, plotH = H - top - bottom;
    const slotW = plotW / Math.max(1, slots.length), barW = Math.max(1, Math.min(48, slotW * 0.7));
    const Y = (h) => top + plotH - (hi > 0 ? plotH * h / hi : 0);
    for (let k = 0; k <= 4; k++) {  // the hours axis: five ticks
      const v = hi * k / 4, y = Y(v);
      s.append(svg("line", { x1: left, x2: W - right, y1: y, y2: y, stroke: "#e4e7ec" }));
      const tx = svg("text", { x: left - 6, y: y + 4, class: "axis", "text-anchor": "end" });
      tx.textContent = axisHours(v);
      s.append(tx);
    }
    const yt = svg("text", { x: 12, y: top + plotH / 2, class: "axis", "text-anchor": "middle", transform: "rotate(-90 12 " + (top + plotH / 2) + ")" });
    yt.textContent = "accelerator-hours";
    s.append(yt);
    const every = Math.max(1, Math.ceil(44 / slotW));  // day labels at least 44 px apart
    slots.forEach((day, i) => {
      const x0 = left + i * slotW, cx = x0 + slotW / 2;
      const row = byDay.get(day);
      if (i % every === 0) {
        const tx = svg("text", { x: cx, y: top + plotH + 16, class: "axis", "text-anchor": "middle" });
        tx.textContent = day.slice(5);
        s.append(tx);
      }
      if (!row) return;
      const g = svg("g", { class: "day", "data-day": day, "data-v": String(row.accelerator_hours) });
      let acc = 0;
      for (const p of fleetParts(row, buckets, labels)) {
        if (!(p.h > 0)) continue;
        const y1 = Y(acc), y2 = Y(acc + p.h);
        g.append(svg("rect", { x: cx - barW / 2, y: y2, width: barW, height: Math.max(0, y1 - y2), fill: bucketColor(p.key), "data-bucket": p.key, "data-hours": String(p.h) }));
        acc += p.h;
      }
      const hit = svg("rect", { x: x0, y: top, width: slotW, height: plotH, fill: "transparent", class: "day-hit" });
      hit.addEventListener("mousemove", (ev) => showTip(ev, partsTip(day + " (UTC)", row, fleetParts(row, buckets, labels))));
      hit.addEventListener("mouseleave", hideTip);
      g.append(hit);
      s.append(g);
    });
    const xt = svg("text", { x: left + plotW / 2, y: H - 6, class: "axis", "text-anchor": "middle" });
    xt.textContent = "day (UTC)";
    s.append(xt);
    box.replaceChildren(s);
  }
  function niceCeil(v) {  // an axis end: 1, 2, 2.5 or 5 times a power of ten, at or above v
    if (!(v > 0)) return 1;
    const p = 10 ** Math.floor(Math.log10(v));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v * (1 - 1e-12)) return m * p;
    return 10 * p;
  }
  function axisHours(v) { return v >= 1000 ? fixedPy(v / 1000, v % 1000 === 0 ? 0 : 1) + "k" : String(Number(v.toPrecision(4))); }
  await load(true);
  every(4000, () => load().catch(() => {}));
}

// mlgoodput ui: jobs side by side.
"use strict";

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
    const facts = [["goodput", (j) => el("span", { class: "lvl-" + goodputLevel(j.goodput_pct), text: pct(j.goodput_pct) })], ["wall time", (j) => secs(j.wall_s)], ["attempts", (j) => num(j.attempts, 0)],
      ["disruptions", (j) => num(j.disruptions, 0)], ["last step", (j) => num(j.last_step, 0)], ["ideal step time", (j) => secs(j.report.ideal_step_time_s)], ["hosts", (j) => num(j.hosts, 0)]];
    const body = el("tbody", {}, facts.map(([k, f]) => el("tr", {}, el("td", {}, el("b", { text: k })), d.jobs.map((j) => el("td", { class: "num" }, f(j))))),
      order.filter((k) => rows[k].v.some((r) => r && r.s > 0)).map((k) => el("tr", { "data-bucket": k }, el("td", { class: "label" }, el("span", { class: "sw", style: "background:" + bucketColor(k) }), rows[k].label),
        d.jobs.map((j, i) => { const r = rows[k].v[i]; return el("td", { class: "num", text: r ? secs(r.s) + "  ·  " + r.pct.toFixed(2) + " %" : "–" }); }))));
    const stacks = d.jobs.map((j) => el("div", { style: "margin-bottom:10px" }, el("div", { text: j.job + "  " + pct(j.goodput_pct) }),
      el("div", { class: "stack", style: "margin:4px 0" }, reportRows(j.report, d.labels).filter((r) => r.s > 0).map((r) => el("div", { style: "width:" + r.pct + "%;background:" + bucketColor(r.key),
        onmousemove: (ev) => showTip(ev, r.label + "\n" + secs(r.s) + " (" + r.pct.toFixed(2) + " %)"), onmouseleave: hideTip })))));
    const sBox = el("div", { class: "chart", id: "compare-steps" });
    out.replaceChildren(card("Where the time went", null, stacks, el("div", { class: "scroll full" }, el("table", { id: "compare" }, el("thead", {}, head), body))),
      card("Step time", "Mean step time against time since each job started.", sBox));
    const rel = d.jobs.map((j) => j.step.x.map((x) => x - (j.step.x[0] || 0)));
    const xs = Array.from(new Set(rel.flat())).sort((a, b) => a - b);
    const idx = new Map(xs.map((x, i) => [x, i]));
    // undefined where a job has no point at another job's x (the line goes on), null at a restart (a gap)
    const data = [xs].concat(d.jobs.map((j, k) => { const ys = xs.map(() => undefined); rel[k].forEach((x, i) => { ys[idx.get(x)] = j.step.mean[i]; }); return ys; }));
    if (xs.length) plot(sBox, { scales: { x: { time: false }, y: { distr: 3 } }, series: [{ label: "since start", value: (u, v) => v === null ? "–" : secs(v) }].concat(d.jobs.map((j, i) => ({ label: j.job, stroke: PALETTE[i % PALETTE.length], value: (u, v) => secs(v) }))),
      axes: [Object.assign(axisSecs("since the job started"), { space: 80, size: 40 }), axisSecs("step time (log scale)")] }, data);
    else sBox.replaceChildren(el("div", { class: "empty", text: "No steps." }));
  }
  await draw();
}

// mlgoodput ui: ML runs: the runs table, one run, compared runs.
"use strict";

// ---- runs ---------------------------------------------------------------------------------
async function runsPage() {
  document.title = "Runs · mlgoodput";
  const d = await api("runs");
  $main.replaceChildren(el("h1", { text: "Runs" }), el("div", { class: "sub", text: "ML runs recorded with machinelearning_run: configs, metrics, system usage and profiles." }),
    card(null, null, d.runs.length ? table("runs", [
      ["run", (r) => r.name], ["group", (r) => r.run_group || "–"], ["started", (r) => when(r.first_time)], ["last event", (r) => when(r.last_time)],
      ["processes", (r) => r.processes, 1], ["metric values", (r) => num(r.metric_values, 0), 1], ["profiles", (r) => r.profile_starts, 1]], d.runs, "")
      : el("div", { class: "empty" }, "No runs in this store. A training's configs and metrics land here with ", el("code", { text: "machinelearning_run(name=NAME)" }), " and ", el("code", { text: "metrics.record(\"loss\", loss, step=step)" }), " from mlgoodput.diagnostics (or run ", el("code", { text: "make demo" }), ").")));
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

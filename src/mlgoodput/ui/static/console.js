// mlgoodput ui: console jobs: logs, progress and resource usage.
"use strict";

// ---- console ------------------------------------------------------------------------------
async function consolesPage() {
  document.title = "Console · mlgoodput";
  const d = await api("console");
  $main.replaceChildren(el("h1", { text: "Console" }), el("div", { class: "sub", text: "Logs, progress bars and resource usage that the console server stored." }),
    card(null, null, d.consoles.length ? el("div", { class: "scroll full" }, el("table", { id: "consoles" }, el("thead", {}, el("tr", {}, ["job", "first event", "last event", "records"].map((h, i) => el("th", { class: i === 3 ? "num" : null, text: h })))),
      el("tbody", {}, d.consoles.map((c) => el("tr", {}, el("td", {}, el("a", { href: "/console/" + enc(c.job), text: c.job })), el("td", { text: when(c.first_time) }), el("td", { text: when(c.last_time) }), el("td", { class: "num", text: num(c.events, 0) }))))))
      : el("div", { class: "empty" }, "No console jobs in this store. A job's logs, progress bars and usage land here when it runs inside ", el("code", { text: "with mlgoodput.console.session(job=NAME):" }), " (or run ", el("code", { text: "make demo" }), ").")));
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
  const sub = el("div", { class: "sub" }, el("span", { text: "console" }));
  const barsCard = card("Progress", null, bars), usageCard = card("CPU usage", "Per process; dashed lines: checkpoints.", uBox);
  barsCard.hidden = usageCard.hidden = true;
  let next = -1, marks = [];
  $main.replaceChildren(el("h1", { text: job }), sub,
    card("Logs", "Times in UTC.", el("div", { class: "tools" }, proc, lvl, text, el("label", {}, follow, " follow")), lost, logs),
    // progress and usage cards appear once they have something to show (a card is never empty)
    el("div", { class: "row" }, barsCard, usageCard));
  function reset() { next = -1; logs.replaceChildren(); loadLogs().catch(() => {}); }
  for (const c of [proc, lvl]) c.addEventListener("change", reset);
  text.addEventListener("input", reset);
  async function loadLogs() {
    const q = "after=" + next + "&level=" + lvl.value + (proc.value ? "&process=" + proc.value : "") + (text.value ? "&q=" + enc(text.value) : "");
    const r = await api("console/" + enc(job) + "/logs?" + q);
    if (sub.childElementCount === 1) sub.append(...pageLinks(r.links, "console"));
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
    barsCard.hidden = !r.bars.length;
    bars.replaceChildren(...(r.bars.length ? r.bars.map((b) => {
      const frac = b.total ? Math.min(1, b.completed / b.total) : 0;
      return el("div", { class: "progress" }, el("div", {}, el("b", { text: b.desc || b.bar }), el("span", { class: "muted", text: "  #" + b.process + "  " + num(b.completed, 0) + (b.total ? " / " + num(b.total, 0) : "") + (b.done ? "  done" : "") })),
        el("div", { class: "track" }, el("div", { class: "fill", style: "width:" + (100 * frac) + "%" })));
    }) : []));
  }
  let uPlotRef = null;
  async function loadUsage() {
    const u = await api("console/" + enc(job) + "/usage?width=" + Math.round(uBox.clientWidth || Math.min(600, $main.clientWidth - 80)));
    marks = u.checkpoints;
    usageCard.hidden = !u.processes.length;  // none yet (sampled with session(usage=True))
    if (!u.processes.length) return;
    const xs = Array.from(new Set(u.processes.flatMap((p) => p.cpu.x))).sort((a, b) => a - b);
    const idx = new Map(xs.map((x, i) => [x, i]));
    const data = [xs].concat(u.processes.map((p) => { const ys = xs.map(() => null); p.cpu.x.forEach((x, i) => { ys[idx.get(x)] = p.cpu.y[i]; }); return ys; }));
    if (uPlotRef && uPlotRef.series.length === data.length) { uPlotRef.setData(data); return; }
    uPlotRef = plot(uBox, { series: [{ label: "time", value: (uu, v) => v === null ? "–" : when(v) }].concat(u.processes.map((p, i) => ({ label: "#" + p.process + " CPU", stroke: PALETTE[i % PALETTE.length], spanGaps: true, value: (uu, v) => v === null ? "–" : v.toFixed(1) + " %" }))),
      axes: [axisTime(), axisPct("CPU (%)")], plugins: [vlinesPlugin(() => marks.map((m) => [m.time, "#7a5af8"]))] }, data);
  }
  await Promise.all([loadLogs(), loadUsage()]);
  every(2000, () => { if (follow.checked) { loadLogs().catch(() => {}); loadUsage().catch(() => {}); } });
}

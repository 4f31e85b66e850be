// mlgoodput ui: starts the pages (loaded last).
"use strict";

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

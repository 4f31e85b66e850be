#!/usr/bin/env bash
# Installs the web UI's JavaScript from npm (js/package-lock.json pins it) and copies the
# files the pages load into src/mlgoodput/ui/static/vendor (gitignored). The pages load
# nothing from the internet. With --if-npm, a machine without npm gets one line and exit 0
# (`make demo`: the demo and the terminal report need no charts).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
install_hint="install Node.js with npm (Debian/Ubuntu: apt-get install npm; macOS: brew install node; else https://nodejs.org), then run make ui-assets"
if ! command -v npm >/dev/null 2>&1; then
  if [ "${1:-}" = "--if-npm" ]; then
    echo "note: npm not found, so the web UI's charts are not built (the demo needs none); for the charts, $install_hint"
    exit 0
  fi
  echo "error: npm is needed to build the web UI's charts: $install_hint" >&2
  exit 1
fi
(cd "$root/js" && npm ci --no-audit --no-fund --loglevel=error)
dest="$root/src/mlgoodput/ui/static/vendor"
mkdir -p "$dest"
cp "$root/js/node_modules/uplot/dist/uPlot.iife.min.js" "$root/js/node_modules/uplot/dist/uPlot.min.css" "$dest/"
cp "$root/js/node_modules/uplot/LICENSE" "$dest/uPlot.LICENSE"
touch "$dest/.built"
echo "web UI assets in $dest"

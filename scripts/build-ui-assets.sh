#!/usr/bin/env bash
# Installs the web UI's JavaScript from npm (js/package-lock.json pins it) and copies the
# files the pages load into src/mlgoodput/ui/static/vendor (gitignored). The pages load
# nothing from the internet.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is needed to build the web UI's assets (Debian: apt-get install npm)" >&2
  exit 1
fi
(cd "$root/js" && npm ci --no-audit --no-fund --loglevel=error)
dest="$root/src/mlgoodput/ui/static/vendor"
mkdir -p "$dest"
cp "$root/js/node_modules/uplot/dist/uPlot.iife.min.js" "$root/js/node_modules/uplot/dist/uPlot.min.css" "$dest/"
cp "$root/js/node_modules/uplot/LICENSE" "$dest/uPlot.LICENSE"
touch "$dest/.built"
echo "web UI assets in $dest"

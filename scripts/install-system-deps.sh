#!/usr/bin/env bash
# Debian packages that some tests drive for real (a Prometheus server and promtool, tmux,
# PostgreSQL and pgbouncer, Chromium with its WebDriver for the web UI's pages).
# Installs only what is missing; without root or apt it says what is missing and goes on,
# and the tests that need a missing program skip with that reason.
set -u
need=()
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || need+=(prometheus)  # promtool comes with it
command -v tmux >/dev/null 2>&1 || need+=(tmux)
{ command -v initdb || ls /usr/lib/postgresql/*/bin/initdb; } >/dev/null 2>&1 || need+=(postgresql)
{ command -v pgbouncer || test -x /usr/sbin/pgbouncer; } >/dev/null 2>&1 || need+=(pgbouncer)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
    || echo "warning: could not install ${need[*]}; tests that need them will skip"
  # the Debian package may start its own service; tests start theirs on loopback. Stop only
  # that service (never other Prometheus processes that happen to run on this machine).
  (service prometheus stop || systemctl stop prometheus) >/dev/null 2>&1 || true
  (service postgresql stop || systemctl stop postgresql) >/dev/null 2>&1 || true
  (service pgbouncer stop || systemctl stop pgbouncer) >/dev/null 2>&1 || true
else
  echo "note: missing ${need[*]} and cannot install (need root and apt-get); those tests will skip"
fi
exit 0

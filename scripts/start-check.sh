#!/usr/bin/env bash
# The README's first command, as a new user runs it in a checkout: `npm start` (scripts/start.mjs) twice on the
# embedded store in a new directory. The first start (no bundle built by it yet) must build the CLI bundle and
# serve; the second must serve without building again. Each lands a demo session and stops on SIGTERM with exit 0
# (scripts/lib/serve-smoke.sh). Prints the ready times and RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d "${TMPDIR:-/tmp}/corral-start-check.XXXXXX")"
# shellcheck source=scripts/lib/serve-smoke.sh
source scripts/lib/serve-smoke.sh
cleanup() {
  if [ -n "$serve_pid" ]; then kill -9 "$(server_of "$serve_pid")" "$serve_pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

rm -f dist/cli/bundle/.start-build
serve_smoke "$work/serve" "start-check (first start)" npm start
if ! grep -q "building the CLI bundle" "$work/serve/log"; then
  echo "start-check: the first start did not build the bundle:" >&2
  cat "$work/serve/log" >&2
  exit 1
fi
serve_smoke "$work/serve" "start-check (second start)" npm start
if grep -q "building the CLI bundle" "$work/serve/log"; then
  echo "start-check: the second start built the bundle again although nothing changed" >&2
  exit 1
fi
echo "start-check: ok"

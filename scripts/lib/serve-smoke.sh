# Sourced by scripts/pack-check.sh and scripts/start-check.sh: `serve_smoke DIR LABEL CMD...` starts CMD (a
# `corral serve`) with a configuration of its own in DIR (port 0, the embedded store in DIR/data, the demo model
# without delays), waits for /readyz (at most 120 s), lands one demo session through the API, stops the server with
# SIGTERM and requires exit 0 (of the server, and of its launcher when there is one). Prints the ready time and the server's RSS; the server's output is in DIR/log.
# The caller's EXIT trap should `kill -9 "$serve_pid"` when it is set (a check that fails midway).
serve_pid=""

# The largest RSS (MB) in the process tree under $1: the server, when a launcher (npm, sh) sits above it.
largest_rss() {
  local largest=0 rss child
  rss="$(awk '/VmRSS/ { print int($2 / 1024) }' "/proc/$1/status" 2> /dev/null || echo 0)"
  largest="$rss"
  for child in $(pgrep -P "$1" || true); do
    rss="$(largest_rss "$child")"
    if [ "$rss" -gt "$largest" ]; then largest="$rss"; fi
  done
  echo "$largest"
}

# The deepest process under $1: the server itself when a launcher (npm, sh) started it.
server_of() {
  local pid="$1" child
  while child="$(pgrep -P "$pid" | head -n 1)" && [ -n "$child" ]; do pid="$child"; done
  echo "$pid"
}

serve_smoke() {
  local dir="$1" label="$2"
  shift 2
  mkdir -p "$dir"
  printf '{ "server": { "port": 0 }, "database": { "dataDir": "%s" }, "demo": { "delayMs": 0 } }\n' "$dir/data" > "$dir/corral.json"
  local started url=""
  started="$(date +%s%N)"
  CORRAL_CONFIG="$dir/corral.json" "$@" > "$dir/log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 1200); do
    url="$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$dir/log" | head -n 1 | sed 's/listening on //' || true)"
    if [ -n "$url" ] && curl -sf "$url/readyz" > /dev/null; then break; fi
    if ! kill -0 "$serve_pid" 2> /dev/null; then break; fi
    url=""
    sleep 0.1
  done
  if [ -z "$url" ]; then
    echo "${label}: corral serve did not become ready:" >&2
    cat "$dir/log" >&2
    return 1
  fi
  echo "${label}: corral serve ready in $((($(date +%s%N) - started) / 1000000)) ms"
  local landed
  landed="$(curl -sf -XPOST "$url/v1/sessions?wait=true" -H 'content-type: application/json' \
    -d '{"agentId":"demo","scope":"serve-smoke","prompt":"Why is checkout failing?"}')"
  if ! grep -q '"exitReason":"completed"' <<< "$landed"; then
    echo "${label}: the demo session did not complete: ${landed}" >&2
    return 1
  fi
  echo "${label}: a demo session landed completed; server RSS $(largest_rss "$serve_pid") MB"
  # SIGTERM to the server itself: a launcher such as npm does not pass it on (Ctrl-C reaches the whole group).
  kill -TERM "$(server_of "$serve_pid")"
  if ! wait "$serve_pid"; then
    echo "${label}: corral serve did not exit 0 on SIGTERM:" >&2
    cat "$dir/log" >&2
    return 1
  fi
  serve_pid=""
}

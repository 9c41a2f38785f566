#!/usr/bin/env bash
# The package as a stranger gets it: build, `npm pack`, and
#   (0) install the tarball with `effect` alone (`npm i --legacy-peer-deps`: no peer installed for us), report the
#       packages installed and the import cost of `corral` (scripts/pack-check/import-time.mjs), run the in-memory
#       embed (embed.mjs), and require that each entry needing optional peers names them and the README's install
#       line (optional-entries.mjs); then run each of the README's install lines alone and import its entry, after
#       requiring that without PGlite the embedded database (corral/sql's dataDir: embedded-missing.mjs, and
#       `corral serve`) fails with the line that installs it, and that Postgres does not need it;
# then install the tarball into an empty temporary project next to the peer dependencies of the stated ranges
# (package.json `peerDependencies`), and there
#   (a) run a plain Node ESM program that embeds Corral (scripts/pack-check/embed.mjs: one session, must complete),
#   (b) type-check a TypeScript file against the shipped declarations (strict, NodeNext, skipLibCheck off),
#   (c) run `npx corral --help` (exit 0),
#   (d) compile the repository's examples/*.ts there with tsc (strict, NodeNext, skipLibCheck off) and run each with
#       plain node: openai-compatible against the fake provider (started from this checkout), durable-postgres on
#       CORRAL_TEST_DATABASE_URL when set (it prints "skipped" without one),
#   (f) run the first agent (examples/first-agent.ts: Agent.run, one call) in the project of (0), where only corral
#       and effect are installed, against the fake provider,
#   (e) start `corral serve` from the installed package (the bundled CLI) on the embedded store in a new directory,
#       wait for /readyz, land a demo session, and stop it with SIGTERM (exit 0); prints ready time and RSS.
# Catches what the repository's own tests cannot: exports that point at missing files, declarations that do not
# resolve, a run-time import of a dev dependency (tsx), a file left out of `files`. Needs the npm registry.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="$(mktemp -d "${TMPDIR:-/tmp}/corral-pack-check.XXXXXX")"
fake_pid=""
# shellcheck source=scripts/lib/serve-smoke.sh
source "$root/scripts/lib/serve-smoke.sh"
cleanup() {
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2> /dev/null || true; fi
  if [ -n "$serve_pid" ]; then kill -9 "$serve_pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

npm run --silent build
pack_json="$(npm pack --ignore-scripts --json --pack-destination "$work")"
# On stdin, not as an argument: npm's listing of every file outgrew what one argument may hold (128 KiB).
read -r tarball size unpacked files < <(node -e '
  const [p] = JSON.parse(require("node:fs").readFileSync(0, "utf8"))
  console.log(p.filename, p.size, p.unpackedSize, p.entryCount)' <<< "$pack_json")
echo "pack-check: ${tarball}: $((size / 1024)) KB packed, $((unpacked / 1024)) KB unpacked, ${files} files"

echo "pack-check (0): npm i --legacy-peer-deps corral effect — nothing else"
bare="$work/bare"
mkdir -p "$bare"
cp scripts/pack-check/embed.mjs scripts/pack-check/optional-entries.mjs scripts/pack-check/import-time.mjs \
  scripts/pack-check/readme-installs.mjs scripts/pack-check/embedded-missing.mjs "$bare/"
printf '{ "name": "corral-pack-check-bare", "private": true, "type": "module" }\n' > "$bare/package.json"
effect_range="$(node -p 'require(process.argv[1]).peerDependencies.effect' "$root/package.json")"
(
  cd "$bare"
  npm install --no-audit --no-fund --prefer-offline --loglevel=error --legacy-peer-deps "$work/$tarball" "effect@$effect_range"
  # 166 before the MCP SDK, OpenTelemetry, PGlite and pg became optional peers (docs/benchmarks.md, "Install, import and package").
  echo "pack-check (0): $(npm ls --all --parseable 2> /dev/null | tail -n +2 | sort -u | wc -l) packages installed (166 when MCP, OpenTelemetry, PGlite and pg were dependencies)"
  node import-time.mjs --runs 3 effect corral corral/testing
  node embed.mjs
  node optional-entries.mjs
  # The README's lines, one entry at a time (--legacy-peer-deps: what the line names is all that is installed), each
  # entry imported once its line is in; the embedded database's line last, after the checks that it is needed.
  while IFS=$'\t' read -r entry line; do
    if [ "$entry" = "corral/sql with { dataDir }" ]; then
      node embedded-missing.mjs
      mkdir -p cli-no-pglite
      printf '{ "server": { "port": 0 }, "database": { "dataDir": "%s" } }\n' "$PWD/cli-no-pglite/data" > cli-no-pglite/corral.json
      status=0
      CORRAL_CONFIG=cli-no-pglite/corral.json timeout 120 node node_modules/corral/bin/corral.js serve > cli-no-pglite/log 2>&1 || status=$?
      if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || ! grep -qF "$line" cli-no-pglite/log || grep -q '^ *at ' cli-no-pglite/log; then
        echo "pack-check: corral serve without PGlite should exit non-zero with the line ${line} and no stack (exit ${status}):" >&2
        cat cli-no-pglite/log >&2
        exit 1
      fi
      echo "pack-check (0): corral serve without PGlite (exit ${status}): $(grep -F "$line" cli-no-pglite/log | head -n 1)"
    fi
    # shellcheck disable=SC2086 # the README's line is words
    ${line} --no-audit --no-fund --prefer-offline --loglevel=error --legacy-peer-deps
    module="${entry%% with *}"
    node --input-type=module -e "await import('${module}')"
    echo "pack-check (0): ${entry} loads after: ${line}"
  done < <(node readme-installs.mjs)
  echo "pack-check (0): $(npm ls --all --parseable 2> /dev/null | tail -n +2 | sort -u | wc -l) packages installed with every README line"
)

# Peers of the stated ranges, and the compiler of the repository's own range for (b).
mapfile -t extras < <(node -e '
  const p = require(process.argv[1])
  for (const [name, range] of Object.entries(p.peerDependencies)) console.log(`${name}@${range}`)
  for (const name of ["typescript", "@types/node"]) console.log(`${name}@${p.devDependencies[name]}`)' "$root/package.json")

app="$work/app"
mkdir -p "$app"
cp scripts/pack-check/embed.mjs scripts/pack-check/typed.ts scripts/pack-check/tsconfig.json \
  scripts/pack-check/import-graph.mjs "$app/"
mkdir -p "$app/examples"
cp examples/*.ts "$app/examples/"
cp scripts/pack-check/tsconfig.examples.json "$app/"
printf '{ "name": "corral-pack-check", "private": true, "type": "module" }\n' > "$app/package.json"
cd "$app"
npm install --no-audit --no-fund --prefer-offline --loglevel=error "$work/$tarball" "${extras[@]}"
echo "pack-check: installed corral with ${extras[*]}"

echo "pack-check (a): plain Node ESM embedding"
node embed.mjs
echo "pack-check (a): what each entry loads, with every peer installed (corral and corral/testing: no optional peer)"
node import-graph.mjs corral corral/testing corral/providers:@effect/platform-node \
  corral/telemetry "corral/mcp:@modelcontextprotocol/sdk"

echo "pack-check (b): tsc --noEmit against the shipped types"
npx --no-install tsc -p tsconfig.json

echo "pack-check (c): npx corral --help"
npx --no-install corral --help > help.txt
grep -q "Usage: corral <command>" help.txt
started="$(date +%s%N)"
node node_modules/corral/bin/corral.js --help > /dev/null
echo "pack-check: corral --help took $((($(date +%s%N) - started) / 1000000)) ms (plain node, installed package)"

echo "pack-check (d): the examples, compiled with tsc and run with plain node"
npx --no-install tsc -p tsconfig.examples.json
# The fake provider is a dev-only script of this checkout (tsx, test support): run it from there, on a free port,
# and read its base URL from the first lines it prints.
(cd "$root" && exec node --import tsx --conditions=corral-source scripts/fake-provider.ts) > "$work/fake.log" 2>&1 &
fake_pid=$!
base_url=""
for _ in $(seq 1 300); do
  base_url="$(sed -n 's/^ *OpenAI-compatible base URL: *//p' "$work/fake.log")"
  if [ -n "$base_url" ] || ! kill -0 "$fake_pid" 2> /dev/null; then break; fi
  sleep 0.2
done
if [ -z "$base_url" ]; then
  echo "pack-check: the fake provider did not start:" >&2
  cat "$work/fake.log" >&2
  exit 1
fi
for compiled in examples-out/*.js; do
  name="$(basename "$compiled" .js)"
  echo "pack-check (d): example ${name}"
  if ! OPENAI_BASE_URL="$base_url" DATABASE_URL="${CORRAL_TEST_DATABASE_URL:-}" node "$compiled"; then
    echo "pack-check: example ${name} failed" >&2
    exit 1
  fi
done
echo "pack-check (f): the first agent (examples/first-agent.ts, compiled above) where only corral and effect are installed"
cp examples-out/first-agent.js "$bare/"
(cd "$bare" && OPENAI_BASE_URL="$base_url" node first-agent.js)
echo "pack-check (e): corral serve from the installed package (the bundled CLI, embedded store in a new directory)"
serve_smoke "$work/serve" "pack-check" node node_modules/corral/bin/corral.js serve
echo "pack-check: ok"

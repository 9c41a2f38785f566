#!/usr/bin/env bash
# OpenAPI check: the document the server serves at /openapi.json is one clients can use. It is built in-process
# (scripts/openapi-check/document.ts, the same `OpenApi.fromApi(Api)` the server serves), linted by Redocly with
# the recommended rules (0 errors; warnings are printed and allowed), turned into `paths` types by
# openapi-typescript, and scripts/openapi-check/client.ts — a few openapi-fetch calls — is type-checked against
# those types. Nothing is started and nothing is fetched from the network.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Redocly sends usage telemetry and checks for updates unless told not to.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true

npx tsx scripts/openapi-check/document.ts "$work/openapi.json"
echo "openapi-check: document $(wc -c <"$work/openapi.json") bytes"

npx redocly lint --config redocly.yaml --format=stylish "$work/openapi.json"

npx openapi-typescript "$work/openapi.json" --output "$work/api.d.ts"

# client.ts imports "./api.js": rootDirs lets it resolve to the types generated here, while openapi-fetch resolves
# from the repository's node_modules (client.ts is compiled where it lives).
cat >"$work/tsconfig.json" <<JSON
{
  "extends": "$root/tsconfig.json",
  "compilerOptions": {
    "rootDirs": ["$root/scripts/openapi-check", "$work"],
    "typeRoots": ["$root/node_modules/@types"],
    "noEmit": true
  },
  "include": [],
  "files": ["$root/scripts/openapi-check/client.ts", "$work/api.d.ts"]
}
JSON
npx tsc -p "$work/tsconfig.json"
echo "openapi-check: lint clean, client generated, typed calls compile"

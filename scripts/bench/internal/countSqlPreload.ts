/**
 * `--import ./scripts/bench/internal/countSqlPreload.ts` (a diagnostic, like countOpsPreload.ts): counts the
 * statements the process sends to Postgres through node-postgres, by their first words, and writes the tally to
 * `CORRAL_COUNT_SQL_FILE` when the process exits, divided by `CORRAL_COUNT_SQL_UNITS` (default 1; e.g. the sessions
 * run, warm-up included). Each statement is one `Query.submit` (its messages written to the socket in one go).
 */
import { writeFileSync } from "node:fs"
import { createRequire } from "node:module"

const require = createRequire(import.meta.url)
const Query = require("pg/lib/query.js") as { prototype: { submit: (...args: Array<unknown>) => unknown } }
const counts = new Map<string, number>()
const submit = Query.prototype.submit
Query.prototype.submit = function(this: { text?: string }, ...args: Array<unknown>) {
  const key = String(this.text ?? "?").replace(/\s+/g, " ").trim().slice(0, 90)
  counts.set(key, (counts.get(key) ?? 0) + 1)
  return submit.apply(this, args)
}
const file = process.env["CORRAL_COUNT_SQL_FILE"] ?? "count-sql.txt"
const units = Number(process.env["CORRAL_COUNT_SQL_UNITS"] ?? "1")
process.on("exit", () => {
  const total = [...counts.values()].reduce((a, b) => a + b, 0)
  const lines = [...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${(n / units).toFixed(2).padStart(8)}  ${k}`)
  writeFileSync(file, [`statements: ${total} (${(total / units).toFixed(2)} per unit)`, ...lines].join("\n") + "\n")
})

/**
 * `--import ./scripts/bench/internal/countOpsPreload.ts` (a diagnostic): counts Effect run-loop instructions in a
 * process that is not the workload — the server under `bench:server --server-node-args` — and writes the report to
 * `CORRAL_COUNT_OPS_FILE` when the process exits, divided by `CORRAL_COUNT_OPS_TURNS` (default 1).
 */
import { writeFileSync } from "node:fs"
import * as OpCount from "./opCount.js"

const count = await OpCount.start()
const file = process.env["CORRAL_COUNT_OPS_FILE"] ?? "count-ops.txt"
const turns = Number(process.env["CORRAL_COUNT_OPS_TURNS"] ?? "1")
process.on("exit", () => writeFileSync(file, count.report(turns, Number(process.env["CORRAL_COUNT_OPS_TOP"] ?? "120"))))

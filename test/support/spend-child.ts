/**
 * spend-child — one of the two processes of the org-budget test (test/store/OrgBudgetProcesses.test.ts):
 *
 *   node --import tsx test/support/spend-child.ts <postgres-url> <label> <sessions> <perDayMicros>
 *
 * Opens Corral over the SQL store on `<postgres-url>` with the billing model (test/support/spendModel.ts: every reply
 * takes 5 ms, so calls of many sessions are in flight together) and the daily budget `<perDayMicros>` for org
 * `acme` (and a large one for every other org), starts `<sessions>` sessions of `acme` and 2 of `beta` at once, waits
 * for all to land, and prints one line (after `READY`, once the agents are published; it starts its sessions when a
 * line arrives on stdin, so that both processes start theirs together): `RESULT <json>` — each session's exit reason and cost, and how many starts
 * were refused with `BudgetExhausted`.
 */
import { Effect, Layer, Redacted } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as OrgBudget from "../../src/rails/OrgBudget.js"
import * as Database from "../../src/store/Database.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { spendingModel } from "./spendModel.js"
import * as Tools from "./tools.js"

const [url, label, count, perDay] = process.argv.slice(2)
const acme = new Principal({ orgId: "acme", userId: `ann-${label}` })
const beta = new Principal({ orgId: "beta", userId: `bob-${label}` })
const agent = { id: "triage", version: 1, name: "Triage", instructions: "Investigate, then answer.", tools: ["echo"] }

const layer = Corral.layer({}).pipe(
  Layer.provide(Layer.mergeAll(
    LiveEvents.layer,
    ToolRegistry.layer(Tools.all),
    Layer.succeed(Providers, Providers.fromRoutes({ default: [spendingModel(3, "spend", 5)] }))
  )),
  Layer.provide(SqlStore.layer().pipe(Layer.provide(Database.layerPostgres(Redacted.make(url ?? ""))))),
  Layer.provide(Layer.succeed(OrgBudget.OrgBudgets, {
    acme: { perDay: Number(perDay) },
    "*": { perDay: 1_000_000_000 }
  }))
)

const main = Effect.gen(function*() {
  const c = yield* Corral
  yield* c.publishAgent(acme, agent)
  yield* c.publishAgent(beta, agent)
  // Both processes start their sessions together: READY, then wait for the test's GO on stdin.
  process.stdout.write("READY\n")
  yield* Effect.async<void>((resume) => {
    process.stdin.once("data", () => resume(Effect.void))
  })
  const runs = [
    ...Array.from({ length: Number(count) }, (_, i) => ({ by: acme, i })),
    ...[0, 1].map((i) => ({ by: beta, i }))
  ]
  const landed = yield* Effect.forEach(
    runs,
    ({ by, i }) => Effect.either(c.run(by, { agentId: "triage", scope: `incident:${label}-${i}`, prompt: `go ${i}` })),
    { concurrency: "unbounded" }
  )
  const sessions = landed.flatMap((e, i) =>
    e._tag === "Right"
      ? [{ org: runs[i]!.by.orgId, exitReason: e.right.exitReason, costMicros: e.right.costMicros }]
      : []
  )
  const refused = landed.flatMap((e) => e._tag === "Left" ? [e.left._tag] : [])
  process.stdout.write(`RESULT ${JSON.stringify({ sessions, refused })}\n`)
})

Effect.runPromise(Effect.scoped(Effect.provide(main, layer))).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`spend-child failed: ${String(error)}\n`)
    process.exit(1)
  }
)

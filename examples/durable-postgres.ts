// A durable embedding: Corral over the SQL store on Postgres (`layerSql({ url })`, migrated on start), with every
// table in its own schema so it stays out of the host's. The session is run by one runtime, which is then closed,
// and read back by a second one built afresh on the same database: what a restarted host would see.
// Needs DATABASE_URL (postgres://user:pass@host:5432/db); without it, prints "skipped: DATABASE_URL not set".
import { Corral, LiveEvents, Providers, ToolRegistry } from "corral"
import { layerSql } from "corral/sql"
import { ScriptedModel } from "corral/testing"
import { Effect, Layer } from "effect"

const url = process.env.DATABASE_URL
if (url === undefined || url === "") {
  console.log("skipped: DATABASE_URL not set")
  process.exit(0)
}

const me = { orgId: "acme", userId: "ops" }

// The service over your ports: the SQL store, live events on it, in-process tools, the provider routes.
const runtime = (script: ReadonlyArray<ScriptedModel.Step>) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(
      LiveEvents.layer,
      ToolRegistry.layer([]),
      Layer.succeed(Providers, Providers.fromRoutes({ default: [ScriptedModel.make({ script })] }))
    )),
    Layer.provideMerge(layerSql({ url, schema: "corral_example" }))
  )

const first = Effect.gen(function*() {
  const corral = yield* Corral
  yield* corral.publishAgent(me, { id: "triage", version: 1, name: "Triage", instructions: "Find the cause." })
  return yield* corral.run(me, { agentId: "triage", scope: "incident:INC-42", prompt: "Why is checkout down?" })
}).pipe(Effect.provide(runtime([ScriptedModel.text("The database is down.")])))

const session = await Effect.runPromise(first)
console.log(`session ${session.id}: ${session.exitReason}`)

// A new runtime on the same database: the session, its turns and its report are still there.
const again = await Effect.runPromise(
  Effect.gen(function*() {
    const corral = yield* Corral
    return { view: yield* corral.get(me, session.id), turns: yield* corral.turns(me, session.id) }
  }).pipe(Effect.provide(runtime([])))
)
console.log(`after a restart: ${again.view.exitReason}, ${again.turns.length} turns stored`)
if (again.view.exitReason !== "completed" || again.turns.length < 2) process.exit(1)

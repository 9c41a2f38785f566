/**
 * Approval of writes as a person meets it: tokens shown once and stored hashed, single-use, expiring, bound to the
 * session's user and to exactly the call shown; refusals recorded; every decided call recorded in the trajectory with
 * origin `handler`; an approved write interrupted by a crash is `unknown_outcome` and never re-run.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Option, Scope, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import { makeMemory } from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Approvals from "../../src/tools/Approvals.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const bob = new Principal({ orgId: "org_a", userId: "bob" })

const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: ["echo", "restart"],
  finalize: "transcript" as const
}

const restartDb = Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }])

/** A Corral over `store` (shared when a test restarts the runtime) with the given tools and model. */
const runtime = (
  store: SessionStore["Type"],
  model: Scripted.Scripted,
  tools: ReadonlyArray<ToolRegistry.ToolHandler> = Tools.all
) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(
      LiveEvents.layer,
      ToolRegistry.layer(tools),
      Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
    )),
    Layer.provide(Layer.succeed(SessionStore, store))
  )

const withCorral = <A, E>(
  model: Scripted.Scripted,
  body: (c: Corral["Type"], store: SessionStore["Type"]) => Effect.Effect<A, E>,
  tools?: ReadonlyArray<ToolRegistry.ToolHandler>
) =>
  Effect.gen(function*() {
    const store = yield* makeMemory
    return yield* Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, agent)
      return yield* body(c, store)
    }).pipe(Effect.provide(runtime(store, model, tools)))
  })

const notices = (c: Corral["Type"], id: string) =>
  Effect.map(
    c.turns(alice, id),
    (turns) => turns.flatMap((t) => t.entry.kind === "notice" && t.entry.rail === "Approvals" ? [t.entry.text] : [])
  )

const refusal = <A, E extends { readonly _tag: string; readonly message?: string }>(self: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(self), (error) => `${error._tag}: ${error.message ?? ""}`)

describe("Approvals", () => {
  it.effect("a token is shown once, to the session's user, and only its hash is stored", () =>
    withCorral(Scripted.make({ script: [restartDb, Scripted.text("done")] }), (c, store) =>
      Effect.gen(function*() {
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
        const token = v.pending[0]?.token ?? ""
        expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/)
        expect(v.pending[0]?.expiresAt).toBe(60 * 60_000)
        // Reading the session later never shows the token again, and the stored state does not hold it.
        const later = yield* c.get(alice, v.id)
        expect(later.pending).toEqual([{
          callId: v.pending[0]?.callId,
          tool: "restart",
          arguments: `{"service":"db"}`
        }])
        const stored = yield* store.getSession("org_a", v.id)
        expect(JSON.stringify(stored)).not.toContain(token)
        const record = yield* store.findApproval("org_a", v.id, Approvals.hashToken(token))
        expect(Option.map(record, (r) => [r.userId, r.tool, r.argsHash])).toEqual(
          Option.some(["alice", "restart", Approvals.hashArguments(`{"service":"db"}`)])
        )
      })))

  it.effect("forged and other users' tokens are refused, recorded, and the write still waits", () =>
    withCorral(Scripted.make({ script: [restartDb, Scripted.text("done")] }), (c) =>
      Effect.gen(function*() {
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
        const token = v.pending[0]?.token ?? ""
        expect(yield* refusal(c.approve(alice, v.id, "forged-token"))).toContain("unknown, forged")
        // Bob is in Alice's org and holds her token: still not his decision to make.
        expect(yield* refusal(c.approve(bob, v.id, token))).toContain("belongs to another user")
        expect(yield* refusal(c.renewApprovals(bob, v.id))).toContain("belongs to another user")
        expect(yield* notices(c, v.id)).toEqual([
          expect.stringContaining("unknown, forged"),
          expect.stringContaining("another user")
        ])
        expect((yield* c.get(alice, v.id)).status).toBe("awaiting_confirmation")
        const done = yield* c.approve(alice, v.id, token)
        expect(done.exitReason).toBe("completed")
      })))

  it.effect("an expired token is refused; fresh tokens revoke the old ones and approve", () =>
    withCorral(Scripted.make({ script: [restartDb, Scripted.text("done")] }), (c) =>
      Effect.gen(function*() {
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
        const old = v.pending[0]?.token ?? ""
        yield* TestClock.adjust("61 minutes")
        expect(yield* refusal(c.approve(alice, v.id, old))).toContain("expired")
        const renewed = yield* c.renewApprovals(alice, v.id)
        const fresh = renewed.pending[0]?.token ?? ""
        expect(fresh).not.toBe(old)
        expect(renewed.pending[0]?.expiresAt).toBe(121 * 60_000)
        // The old token is revoked by the renewal: it is unknown now, not merely expired.
        expect(yield* refusal(c.approve(alice, v.id, old))).toContain("unknown")
        expect((yield* c.approve(alice, v.id, fresh)).exitReason).toBe("completed")
      })))

  it.effect("a token at exactly its expiry instant is expired, not spent; a moment before, it decides", () =>
    withCorral(Scripted.make({ script: [restartDb, Scripted.text("done")] }), (c) =>
      Effect.gen(function*() {
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
        const old = v.pending[0]!
        yield* TestClock.setTime(old.expiresAt!)
        const refused = yield* refusal(c.approve(alice, v.id, old.token!))
        expect(refused).toContain("this token has expired")
        expect(refused).not.toContain("already used")
        expect((yield* c.get(alice, v.id)).status).toBe("awaiting_confirmation")
        const fresh = (yield* c.renewApprovals(alice, v.id)).pending[0]!
        yield* TestClock.setTime(fresh.expiresAt! - 1)
        expect((yield* c.approve(alice, v.id, fresh.token!)).exitReason).toBe("completed")
      })))

  it.effect("a token decides once: a second decision is refused as already decided, naming the first, and recorded", () =>
    Effect.gen(function*() {
      const ran: Array<unknown> = []
      const restart = { ...Tools.restart, run: (args: unknown) => Effect.sync(() => (ran.push(args), "restarted")) }
      const model = Scripted.make({ script: [restartDb, Scripted.text("not restarting")] })
      yield* withCorral(model, (c) =>
        Effect.gen(function*() {
          const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
          const token = v.pending[0]?.token ?? ""
          yield* c.approve(alice, v.id, token, "reject")
          // Approving with the token of a rejected write: refused, the rejection named, and nothing runs.
          const second = yield* Effect.flip(c.approve(alice, v.id, token, "approve"))
          expect(second._tag).toBe("AlreadyDecided")
          if (second._tag !== "AlreadyDecided") return
          expect(second.reason).toBe("already_decided")
          expect(second.decision).toBe("reject")
          expect(second.message).toContain("already rejected by alice")
          expect(ran).toEqual([])
          expect((yield* notices(c, v.id)).at(-1)).toBe(`A decision was refused: ${second.message}.`)
          // The same decision again is refused too: a client retrying an approve learns it did nothing new.
          expect(yield* refusal(c.approve(alice, v.id, token, "reject"))).toContain("AlreadyDecided")
          expect(yield* notices(c, v.id)).toHaveLength(2)
        }), [Tools.echo, restart])
    }))

  it.effect("a token approves once: twice is refused as already decided, a replay on a later identical write is refused", () =>
    Effect.gen(function*() {
      const ran: Array<unknown> = []
      const restart = { ...Tools.restart, run: (args: unknown) => Effect.sync(() => (ran.push(args), "restarted")) }
      const model = Scripted.make({ script: [restartDb, Scripted.text("done"), restartDb, Scripted.text("again")] })
      yield* withCorral(model, (c) =>
        Effect.gen(function*() {
          const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
          const first = v.pending[0]?.token ?? ""
          const done = yield* c.approve(alice, v.id, first)
          expect(done.exitReason).toBe("completed")
          // Approving twice is refused (the first decision stands, named) and does not run the write again.
          expect(yield* refusal(c.approve(alice, v.id, first))).toContain(
            "AlreadyDecided: this token's write (restart) was already approved"
          )
          expect(ran).toHaveLength(1)
          // The model asks for the same restart again: the first token does not approve the new call.
          const again = yield* c.continue(alice, v.id, "it is down again")
          expect(again.pending).toHaveLength(1)
          expect(yield* refusal(c.approve(alice, v.id, first))).toContain("already used")
          expect(ran).toHaveLength(1)
          expect((yield* c.approve(alice, v.id, again.pending[0]?.token ?? "")).exitReason).toBe("completed")
          expect(ran).toHaveLength(2)
        }), [Tools.echo, restart])
    }))

  it.effect("every call is in the trajectory: the model's reads and the handler's decided writes", () =>
    withCorral(
      Scripted.make({
        script: [
          Scripted.toolCalls([
            { name: "restart", arguments: { service: "db" } },
            { name: "restart", arguments: { service: "cache" } },
            { name: "echo", arguments: { q: "health" } }
          ]),
          Scripted.text("db restarted, cache left alone")
        ]
      }),
      (c) =>
        Effect.gen(function*() {
          const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
          expect(v.pending.map((p) => p.arguments)).toEqual([`{"service":"db"}`, `{"service":"cache"}`])
          const [db, cache] = v.pending.map((p) => p.token ?? "")
          const half = yield* c.approve(alice, v.id, db ?? "")
          expect(half.status).toBe("awaiting_confirmation")
          expect(half.pending.map((p) => p.arguments)).toEqual([`{"service":"cache"}`])
          yield* c.approve(alice, v.id, cache ?? "", "reject")
          const [first, second] = yield* c.trajectories(alice, v.id)
          expect(first?.toolCalls.map((r) => [r.origin, r.name, r.status, r.arguments, r.result])).toEqual([
            ["model", "restart", "pending_confirmation", `{"service":"db"}`, expect.stringContaining("approval")],
            ["model", "restart", "pending_confirmation", `{"service":"cache"}`, expect.stringContaining("approval")],
            ["model", "echo", "ok", `{"q":"health"}`, "echo:health"]
          ])
          expect(second?.toolCalls.map((r) => [r.origin, r.effect, r.status, r.arguments, r.result, r.isError]))
            .toEqual([
              ["handler", "write", "ok", `{"service":"db"}`, "restarted db", false],
              ["handler", "write", "not_executed", `{"service":"cache"}`, "declined by a person; it did not run", false]
            ])
        })
    ))

  it.effect("an approved write cut off by a crash is unknown_outcome after the restart and never runs again", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      const started = yield* Deferred.make<void>()
      let runs = 0
      const hanging = {
        ...Tools.restart,
        run: () =>
          Effect.zipRight(
            Effect.sync(() => runs++),
            Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
          )
      }
      // The first process: the approved restart hangs, and the process dies while it runs.
      const first = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        runtime(store, Scripted.make({ script: [restartDb] }), [Tools.echo, hanging]),
        first
      )
      const c1 = yield* Effect.provide(Corral, context)
      yield* c1.publishAgent(alice, agent)
      const v = yield* c1.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
      const approving = yield* Effect.fork(c1.approve(alice, v.id, v.pending[0]?.token ?? ""))
      yield* Deferred.await(started)
      yield* Scope.close(first, Exit.void)
      yield* Fiber.await(approving)

      // The next process: recovery closes the write as unknown_outcome, tells the model and the person, and the
      // session continues without running it again.
      const model = Scripted.make({ script: [Scripted.text("I will check whether db restarted before retrying.")] })
      yield* Effect.gen(function*() {
        const c2 = yield* Corral
        const recovered = yield* c2.get(alice, v.id)
        expect(recovered.status).toBe("interrupted")
        expect(recovered.pending).toEqual([])
        const notice = (yield* notices(c2, v.id)).at(-1)
        expect(notice).toContain("outcome is unknown and it was NOT run again")
        // Deciding it again is refused as already decided (approved); nothing runs.
        expect(yield* refusal(c2.approve(alice, v.id, v.pending[0]?.token ?? ""))).toContain("already approved")
        expect((yield* c2.get(alice, v.id)).status).toBe("interrupted")
        const next = yield* c2.continue(alice, v.id, "what happened?")
        expect(next.exitReason).toBe("completed")
        const seen = model.requests[0]?.messages.map((m) => m.kind === "notice" ? m.text : "").join("\n") ?? ""
        expect(seen).toContain("unknown")
        expect(runs).toBe(1)
      }).pipe(Effect.provide(runtime(store, model, [Tools.echo, hanging])))
    }))
})

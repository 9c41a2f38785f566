/**
 * The untested corners of what a burst records and refuses (issue 15), each failing without the code it covers:
 *
 * - Approvals: a token whose record names another tool or other arguments is refused; so is a token whose write no
 *   longer waits (its landing was lost with the store), and nothing runs.
 * - Landing: the author hook's artifact lands on the report; a failing author is recorded (`landing.author`) and never
 *   prevents finalize; a finalize reply that fails the report schema falls back, naming the schema problem; the
 *   fallback of a custom report schema is valid against that schema.
 * - Run-time notes: an agent published under an earlier configuration, whose tier or tool is gone now, runs with
 *   the problem recorded in its trajectory (`tier_unknown`, `tool_unknown`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { Effect, Layer, Option } from "effect"
import { Corral } from "../../src/Corral.js"
import type { AgentSpecInput } from "../../src/domain/AgentSpec.js"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import { Principal } from "../../src/domain/Principal.js"
import { defaultReportSchema } from "../../src/domain/Report.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import { Ids, random } from "../../src/session/Ids.js"
import { AuthorPhase } from "../../src/session/Landing.js"
import type { Author } from "../../src/session/Landing.js"
import { makeMemory } from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Approvals from "../../src/tools/Approvals.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })

const triage = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: ["echo", "restart"],
  finalize: "transcript" as const
}

const restartDb = Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }])

/** Corral over `store` (shared when a test changes the configuration) with the given routes, tools and ids. */
const runtime = (
  store: SessionStore["Type"],
  routes: Readonly<Record<string, ReadonlyArray<ModelProvider>>>,
  tools: ReadonlyArray<ToolRegistry.ToolHandler> = Tools.all,
  ids = random
) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(
      LiveEvents.layer,
      ToolRegistry.layer(tools),
      Layer.succeed(Providers, Providers.fromRoutes(routes))
    )),
    Layer.provide(Layer.succeed(SessionStore, store)),
    Layer.provide(Layer.succeed(Ids, ids))
  )

/** A restart that records what it was asked to do. */
const recordingRestart = (ran: Array<unknown>) => ({
  ...Tools.restart,
  run: (args: unknown) => Effect.sync(() => (ran.push(args), "restarted"))
})

describe("Corners: approval tokens", () => {
  it.effect("a token recorded for another tool or other arguments than the waiting write is refused; nothing runs", () =>
    Effect.gen(function*() {
      const ran: Array<unknown> = []
      const store = yield* makeMemory
      const model = Scripted.make({ script: [restartDb, Scripted.text("done")] })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, triage)
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
        const stored = yield* store.getSession("org_a", v.id)
        const waiting = Option.getOrThrow(stored).state.pending[0]!
        // Records that disagree with the write they are bound to (its call and round): no path of the runtime mints
        // one; a row from elsewhere, or a state rewritten under it, must still not approve the write that waits.
        const planted = [
          ["tok-other-tool", "echo", waiting.arguments],
          ["tok-other-args", "restart", `{"service":"payments"}`]
        ] as const
        for (const [token, tool, args] of planted) {
          yield* store.issueApprovals(v.id, [{
            tokenHash: Approvals.hashToken(token),
            orgId: "org_a",
            userId: "alice",
            sessionId: v.id,
            callId: waiting.callId,
            turnSeq: waiting.turnSeq,
            tool,
            argsHash: Approvals.hashArguments(args),
            createdAt: 0,
            expiresAt: 60 * 60_000
          }])
          const refused = yield* Effect.flip(c.approve(alice, v.id, token))
          expect(refused).toMatchObject({ _tag: "InvalidSessionState", reason: "mismatch" })
          expect(refused.message).toContain("another tool or other arguments")
        }
        expect(ran).toEqual([])
        expect((yield* c.get(alice, v.id)).status).toBe("awaiting_confirmation")
        const notices = (yield* c.turns(alice, v.id)).filter((t) => t.entry.kind === "notice")
        expect(notices).toHaveLength(2)
        // The write still waits, and fresh tokens decide it: it runs with exactly the arguments shown.
        const renewed = yield* c.renewApprovals(alice, v.id)
        expect((yield* c.approve(alice, v.id, renewed.pending[0]?.token ?? "")).exitReason).toBe("completed")
        expect(ran).toEqual([{ service: "db" }])
      }).pipe(Effect.provide(runtime(store, { default: [model] }, [Tools.echo, recordingRestart(ran)])))
    }))

  it.effect("a token whose write no longer waits (its landing was lost with the store) is refused; nothing runs", () =>
    Effect.gen(function*() {
      const ran: Array<unknown> = []
      const minted: Array<string> = []
      const ids = { ...random, token: () => (minted.push(random.token()), minted.at(-1)!) }
      const base = yield* makeMemory
      let down = true
      // The store takes the tokens, then refuses the state that would make the session wait for them (once).
      const store: SessionStore["Type"] = {
        ...base,
        saveState: (sessionId, state, at) =>
          down && state.status === "awaiting_confirmation"
            ? Effect.suspend(() => {
              down = false
              return Effect.fail(new PersistenceFailed({ operation: "saveState", message: "the database went away" }))
            })
            : base.saveState(sessionId, state, at)
      }
      const model = Scripted.make({ script: [restartDb, Scripted.text("checked, nothing to do")] })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, triage)
        const sessionId = "ses_lost"
        const failed = yield* Effect.flip(
          c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it", sessionId })
        )
        expect(failed._tag).toBe("PersistenceFailed")
        expect(minted).toHaveLength(1)
        const interrupted = yield* c.get(alice, sessionId)
        expect(interrupted).toMatchObject({ status: "interrupted", exitReason: "crashed", pending: [] })

        const refused = yield* Effect.flip(c.approve(alice, sessionId, minted[0]!))
        expect(refused).toMatchObject({ _tag: "InvalidSessionState", reason: "not_pending" })
        expect(refused.message).toContain("no longer waits for a decision")
        expect(ran).toEqual([])
        // The session goes on with a follow-up; the write never ran.
        expect((yield* c.continue(alice, sessionId, "what now?")).exitReason).toBe("completed")
        expect(ran).toEqual([])
      }).pipe(Effect.provide(runtime(store, { default: [model] }, [Tools.echo, recordingRestart(ran)], ids)))
    }))
})

const spec = (fields: Parameters<typeof Harness.agent>[0] = {}) => Harness.agent({ tools: Tools.names, ...fields })

/** One burst of `spec` against `model`, with `author` as the author phase when given. */
const land = (
  model: Scripted.Scripted,
  options: { readonly spec?: ReturnType<typeof spec>; readonly author?: Author } = {}
) =>
  Harness.drive(
    Harness.runBurst({ spec: options.spec ?? spec() }).pipe(
      Effect.provide(Harness.layer({ providers: [model], tools: Tools.all })),
      Effect.provideService(AuthorPhase, Option.fromNullable(options.author))
    )
  )

const echoThenAnswer = () =>
  Scripted.make({
    script: [Scripted.toolCalls([{ name: "echo", arguments: { q: "db" } }]), Scripted.text("the db is down")]
  })

describe("Corners: landing", () => {
  it.effect("the author's artifact lands on the model's report; the author saw the exit reason and the transcript", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const landed = yield* land(echoThenAnswer(), {
        author: (input) =>
          Effect.sync(() => {
            seen.push(input.reason, ...input.messages.map((m) => m.kind))
            return { postmortem: `ended ${input.reason} after ${input.messages.length} entries` }
          })
      })
      expect(landed.reason).toBe<ExitReason>("completed")
      expect(seen).toEqual(["completed", "user", "assistant", "tool_results", "assistant"])
      expect(landed.report).toMatchObject({
        source: "model",
        artifact: { postmortem: "ended completed after 4 entries" }
      })
    }))

  it.effect("a failing or dying author is recorded as landing.author and never prevents finalize", () =>
    Effect.gen(function*() {
      const authors: ReadonlyArray<readonly [Author, string]> = [
        [() => Effect.fail("the wiki is read-only"), "the wiki is read-only"],
        [() => Effect.die(new Error("author bug")), "author bug"]
      ]
      for (const [author, why] of authors) {
        const model = echoThenAnswer()
        const landed = yield* land(model, { author })
        expect(landed.reason).toBe<ExitReason>("completed")
        expect(landed.report.source).toBe("model")
        expect(landed.report.artifact).toBeUndefined()
        expect(model.requests.at(-1)?.responseSchema).toBeDefined() // the finalize call was made
        expect(landed.trajectory.errors).toEqual([{ code: "landing.author", message: expect.stringContaining(why) }])
      }
    }))

  it.effect("a finalize reply that fails the report schema falls back, and the fallback reason names the problem", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.text("the db is down")],
        report: () => Scripted.text(JSON.stringify({ summary: 42, findings: [], confidence: "certain", nextSteps: [] }))
      })
      const landed = yield* land(model)
      expect(landed.report.source).toBe("fallback")
      expect(landed.report.fallbackReason).toBe(
        "the finalize reply did not match the report schema: /summary: must be string; " +
          "/confidence: must be equal to one of the allowed values"
      )
      expect(new Ajv().validate(defaultReportSchema, landed.report.data)).toBe(true)
    }))

  it.effect("a custom report schema's fallback is valid against it: after a bad finalize reply and at a ceiling", () =>
    Effect.gen(function*() {
      const reportSchema = {
        type: "object",
        additionalProperties: false,
        required: ["verdict", "rootCause", "severity", "affected", "timeline", "nextAction", "confidence", "paged"],
        properties: {
          verdict: { type: "string", enum: ["resolved", "mitigated", "open"] },
          rootCause: { type: "string", minLength: 20, maxLength: 400 },
          severity: { type: "integer", minimum: 1, maximum: 5 },
          affected: { type: "array", minItems: 2, items: { type: "string", minLength: 1 } },
          timeline: {
            type: "object",
            required: ["detectedAt", "source"],
            properties: { detectedAt: { type: "string" }, source: { const: "corral" } }
          },
          nextAction: { type: "string" },
          confidence: { type: "number", minimum: 0.1, maximum: 1 },
          paged: { type: "boolean" }
        }
      }
      const validate = new Ajv().compile(reportSchema)
      const badReply = Scripted.make({
        script: [Scripted.text("done")],
        report: () => Scripted.text("{\"verdict\":1}")
      })
      const ceiling = Scripted.make({ script: [Scripted.toolCalls([{ name: "echo", arguments: { q: "a" } }])] })
      const runs = [
        yield* land(badReply, { spec: spec({ reportSchema }) }),
        yield* land(ceiling, { spec: spec({ reportSchema, limits: { modelCallsPerBurst: 1 } }) })
      ]
      expect(runs.map((r) => r.reason)).toEqual<Array<ExitReason>>(["completed", "burst_limit"])
      for (const landed of runs) {
        expect(landed.report.source).toBe("fallback")
        expect(validate(landed.report.data), JSON.stringify(validate.errors)).toBe(true)
        expect(landed.report.fallbackReason).not.toContain("could not be satisfied")
        expect(landed.report.data).toMatchObject({ rootCause: expect.stringContaining(landed.reason) })
      }
      expect(runs[0]?.report.fallbackReason).toContain("/verdict")
    }))
})

describe("Corners: run-time notes", () => {
  /** Publishes `agent` under a configuration that knows it, then runs it under one that no longer does. */
  const publishedEarlier = (
    agent: Record<string, unknown>,
    before: Readonly<Record<string, ReadonlyArray<ModelProvider>>>,
    after: Readonly<Record<string, ReadonlyArray<ModelProvider>>>,
    toolsAfter: ReadonlyArray<ToolRegistry.ToolHandler>
  ) =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      yield* Effect.flatMap(Corral, (c) => c.publishAgent(alice, agent as AgentSpecInput)).pipe(
        Effect.provide(runtime(store, before))
      )
      return yield* Effect.gen(function*() {
        const c = yield* Corral
        const v = yield* c.run(alice, { agentId: String(agent.id), scope: "incident:1", prompt: "go" })
        const [trajectory] = yield* c.trajectories(alice, v.id)
        return { view: v, errors: trajectory?.errors ?? [] }
      }).pipe(Effect.provide(runtime(store, after, toolsAfter)))
    })

  it.effect("an agent whose tier is no longer configured runs with tier_unknown in its trajectory", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.text("done")] })
      const { errors, view } = yield* publishedEarlier(
        { ...triage, id: "deep-agent", tier: "deep" },
        { default: [model], deep: [model] },
        { default: [model] },
        Tools.all
      )
      expect(errors).toContainEqual({ code: "tier_unknown", message: expect.stringContaining("deep") })
      // No request, no call counted, and the session is not spent for good: configuring the tier again is enough.
      expect(view.exitReason).toBe("provider_failed")
      expect(view.modelCalls).toBe(0)
      expect(model.requests).toHaveLength(0)
    }))

  it.effect("an agent whose tool is no longer offered runs without it, with tool_unknown in its trajectory", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.toolCalls([{ name: "echo", arguments: { q: "db" } }]), Scripted.text("done")]
      })
      const { errors, view } = yield* publishedEarlier(triage, { default: [model] }, { default: [model] }, [
        Tools.echo
      ])
      expect(view.exitReason).toBe("completed")
      expect(errors).toContainEqual({ code: "tool_unknown", message: expect.stringContaining("restart") })
      expect(model.requests[0]?.tools.map((t) => t.name)).toEqual(["echo"])
    }))
})

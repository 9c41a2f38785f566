import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type { Stream } from "effect"
import type { CorralErrorOf, CorralService } from "../../src/index.js"
import {
  AgentNotFound,
  AlreadyDecided,
  BudgetExhausted,
  Corral,
  CorralError,
  FieldIssue,
  InvalidRequest,
  InvalidSessionState,
  isCorralError,
  PersistenceFailed,
  Principal,
  ProviderError,
  ScopeMismatch,
  SessionNotFound
} from "../../src/index.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Tools from "../support/tools.js"

/** One constructed member per tag; the mapped type makes a tag added to the union without a sample a type error. */
const members: { readonly [K in CorralError["_tag"]]: CorralErrorOf<K> } = {
  InvalidRequest: new InvalidRequest({
    message: "the agent spec is invalid",
    issues: [new FieldIssue({ path: "tools.0", message: "unknown tool" })]
  }),
  AgentNotFound: new AgentNotFound({ agentId: "triage", version: 2 }),
  SessionNotFound: new SessionNotFound({ sessionId: "ses_1" }),
  ScopeMismatch: new ScopeMismatch({ message: "another scope", expected: "incident:1", actual: "incident:2" }),
  InvalidSessionState: new InvalidSessionState({ sessionId: "ses_1", message: "nothing pending", reason: "spent" }),
  AlreadyDecided: new AlreadyDecided({
    sessionId: "ses_1",
    message: "already decided",
    reason: "already_decided",
    decision: "approve",
    callId: "call_1"
  }),
  BudgetExhausted: new BudgetExhausted({
    message: "org acme has spent its daily budget",
    orgId: "acme",
    perDayMicros: 1_000_000,
    spentMicros: 1_000_010,
    resetsAt: "2026-12-07T00:00:00.000Z"
  }),
  PersistenceFailed: new PersistenceFailed({ operation: "appendTurn", message: "the store did not answer" })
}

// What another installed copy of this package would define: the same tag and fields, a different class.
class CopiedSessionNotFound extends Schema.TaggedError<CopiedSessionNotFound>()("SessionNotFound", {
  sessionId: Schema.String,
  message: Schema.String
}) {}
class CopiedFieldIssue extends Schema.Class<CopiedFieldIssue>("FieldIssue")({
  path: Schema.String,
  message: Schema.String
}) {}
class CopiedInvalidRequest extends Schema.TaggedError<CopiedInvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  issues: Schema.Array(CopiedFieldIssue)
}) {}
// A class that borrows a tag of the union with other fields.
class ImpostorSessionNotFound extends Schema.TaggedError<ImpostorSessionNotFound>()("SessionNotFound", {
  sessionId: Schema.Number
}) {}

// --- type level: the union is exactly what the service's methods fail with ---
type FailureOf<F> = F extends (...args: ReadonlyArray<never>) => infer R
  ? R extends Effect.Effect<unknown, infer E, unknown> ? E : R extends Stream.Stream<unknown, infer E, unknown> ? E
  : never
  : never
type ServiceFailure = { [K in keyof CorralService]: FailureOf<CorralService[K]> }[keyof CorralService]
type Equals<A, B> = [A] extends [B] ? [B] extends [A] ? true : false : false
/** Fails to compile when a method fails with something outside `CorralError`, or the union holds a tag no method uses. */
const unionIsTheServiceFailures: Equals<ServiceFailure, CorralError> = true
/** `run` can fail every way the service can. */
const runFailsWithTheUnion: Equals<FailureOf<CorralService["run"]>, CorralError> = true
/** Narrower methods stay narrow: reading a session never claims an agent or a scope failure. */
const getStaysNarrow: Equals<FailureOf<CorralService["get"]>, CorralErrorOf<"SessionNotFound" | "PersistenceFailed">> =
  true

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const agent = { id: "triage", version: 1, name: "Triage", instructions: "Find the cause.", tools: ["echo", "restart"] }

describe("isCorralError", () => {
  it("the type-level checks hold", () => {
    expect([unionIsTheServiceFailures, runFailsWithTheUnion, getStaysNarrow]).toEqual([true, true, true])
  })

  it("accepts every member of the union, as constructed", () => {
    expect(Object.keys(members).sort()).toEqual(CorralError.members.map((m) => m._tag).sort())
    for (const error of Object.values(members)) expect([error._tag, isCorralError(error)]).toEqual([error._tag, true])
  })

  it("accepts an error built by another copy of the package, of the right shape", () => {
    const copied = new CopiedSessionNotFound({ sessionId: "ses_1", message: "gone" })
    expect(copied instanceof SessionNotFound).toBe(false)
    expect(isCorralError(copied)).toBe(true)
    const invalid = new CopiedInvalidRequest({
      message: "bad",
      issues: [new CopiedFieldIssue({ path: "id", message: "required" })]
    })
    expect(isCorralError(invalid)).toBe(true)
  })

  it("rejects lookalikes: a borrowed tag, a plain object, an untagged Error, another tagged error, a string", () => {
    const lookalikes: ReadonlyArray<unknown> = [
      new ImpostorSessionNotFound({ sessionId: 42 }),
      { _tag: "SessionNotFound", sessionId: 42 },
      // Right tag and fields, but a plain object is not an error: decode it with the `CorralError` schema.
      { _tag: "SessionNotFound", sessionId: "ses_1", message: "gone" },
      Object.assign(new Error("gone"), { _tag: "SessionNotFound", sessionId: "ses_1" }),
      new Error("SessionNotFound"),
      new ProviderError({ kind: "rate_limit", message: "slow down" }),
      "SessionNotFound",
      null,
      undefined,
      42
    ]
    for (const u of lookalikes) expect([u, isCorralError(u)]).toEqual([u, false])
  })

  it("recognises a wire body once decoded with the CorralError schema, and encodes back to it", () => {
    const body = { _tag: "AgentNotFound", agentId: "triage", version: 3, message: "no version 3" }
    const decoded = Schema.decodeUnknownSync(CorralError)(body)
    expect(decoded).toBeInstanceOf(AgentNotFound)
    expect(isCorralError(decoded)).toBe(true)
    expect(Schema.encodeSync(CorralError)(decoded)).toEqual(body)
  })
})

describe("CorralError through the Corral service", () => {
  it.effect("every failure the service produces is recognised, and catchTags over run handles them all", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, agent)
      const seen = [
        yield* Effect.flip(c.publishAgent(alice, { ...agent, tools: ["rm_rf"] })),
        yield* Effect.flip(c.run(alice, { agentId: "nobody", scope: "incident:1", prompt: "why?" })),
        yield* Effect.flip(c.get(alice, "ses_missing"))
      ]
      const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
      expect(v.status).toBe("awaiting_confirmation")
      const token = v.pending[0]?.token ?? ""
      seen.push(
        yield* Effect.flip(c.continue(alice, v.id, "hurry", { scope: "incident:2" })),
        yield* Effect.flip(c.approve(alice, v.id, "forged-token"))
      )
      yield* c.approve(alice, v.id, token)
      seen.push(yield* Effect.flip(c.approve(alice, v.id, token)))
      expect(seen.map((error) => [error._tag, isCorralError(error)])).toEqual([
        ["InvalidRequest", true],
        ["AgentNotFound", true],
        ["SessionNotFound", true],
        ["ScopeMismatch", true],
        ["InvalidSessionState", true],
        ["AlreadyDecided", true]
      ])

      const handled = (e: CorralError) => Effect.succeed(`handled ${e._tag}`)
      // One handler per tag of the union; the error channel left over is `never`, so a tag added to the union (and
      // to `run`) without a handler here stops this file compiling.
      const recovered: Effect.Effect<string> = c.run(alice, { agentId: "nobody", scope: "incident:1", prompt: "x" })
        .pipe(
          Effect.as("landed"),
          Effect.catchTags({
            InvalidRequest: handled,
            AgentNotFound: handled,
            SessionNotFound: handled,
            ScopeMismatch: handled,
            InvalidSessionState: handled,
            BudgetExhausted: handled,
            AlreadyDecided: handled,
            PersistenceFailed: handled
          })
        )
      expect(yield* recovered).toBe("handled AgentNotFound")
    }).pipe(
      Effect.provide(Corral.layerMemory({
        providers: [
          Scripted.make({
            script: [Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }]), Scripted.text("done")]
          })
        ],
        tools: Tools.all
      }))
    ))
})

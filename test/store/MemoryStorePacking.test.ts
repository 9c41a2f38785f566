/**
 * The memory store keeps closed trajectories packed (store/internal/packing): what it reads back must be what was
 * saved — the same fields, values, key order and prototypes — for real bursts of every kind and for any script.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Context } from "effect"
import { Effect, Equal, Layer } from "effect"
import type { TurnEntry } from "../../src/domain/Message.js"
import type { Trajectory } from "../../src/domain/Trajectory.js"
import { Usage } from "../../src/domain/Usage.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Packing from "../../src/store/internal/packing.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Arbitraries from "../../src/testing/Arbitraries.js"
import * as Harness from "../../src/testing/Harness.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const spec = Harness.agent({ tools: Tools.names })

/** The in-memory ports over `store`, routing the default tier to `providers`. */
const ports = (store: Context.Tag.Service<SessionStore>, providers: ReadonlyArray<ModelProvider>) =>
  Layer.mergeAll(
    LiveEvents.layer,
    ToolRegistry.layer(Tools.all),
    Layer.succeed(Providers, Providers.fromRoutes({ default: providers }))
  ).pipe(Layer.provideMerge(Layer.succeed(SessionStore, store)))

/** Runs one burst per route of `routes` on one session of `store`: what each burst saved, and what is read back. */
const bursts = (
  store: Context.Tag.Service<SessionStore>,
  routes: ReadonlyArray<ReadonlyArray<ReadonlyArray<Scripted.Step>>>,
  sessionId = "ses_pack"
) =>
  Effect.gen(function*() {
    const saved: Array<Trajectory> = []
    let session = Harness.session(spec, { id: sessionId })
    let history: ReadonlyArray<TurnEntry> = []
    for (const route of routes) {
      const providers = route.map((script, i) =>
        Scripted.make({ name: `p${i}`, script, maxAttempts: 2, timeoutMs: 30_000, whenDone: Scripted.text("done") })
      )
      const landed = yield* Harness.drive(
        Harness.runBurst({ spec, session, history, prompt: `burst ${saved.length}` }).pipe(
          Effect.provide(ports(store, providers))
        )
      )
      saved.push(landed.trajectory)
      session = landed.session
      history = landed.messages
    }
    const read = yield* store.trajectories(session.principal.orgId, session.id)
    return { saved, read }
  })

/** Equal as a reader sees it: fields, values, key order, prototypes; `Equal` for the domain's classes. */
const expectSame = (read: ReadonlyArray<Trajectory>, saved: ReadonlyArray<Trajectory>) => {
  expect(read).toStrictEqual(saved)
  expect(read.map((t) => JSON.stringify(t))).toEqual(saved.map((t) => JSON.stringify(t)))
  read.forEach((t, i) => {
    expect(t.usage).toBeInstanceOf(Usage)
    expect(Equal.equals(t.usage, saved[i]!.usage)).toBe(true)
    expect(t.principal).toStrictEqual(saved[i]!.principal)
  })
}

describe("MemoryStore keeps closed trajectories packed", () => {
  it.effect("reads back every burst of a session as saved: tool calls, errors, decisions, reports", () =>
    Effect.gen(function*() {
      const { read, saved } = yield* bursts(yield* MemoryStore.makeMemory, [
        // tools: ok, unknown, malformed JSON, schema-invalid (three strikes), a dying tool, a truncated result
        [[
          Scripted.toolCalls([
            { name: "echo", arguments: { q: "a" } },
            { name: "nope", arguments: { q: "b" } },
            { name: "echo", arguments: "{\"q\":" },
            { name: "echo", arguments: { z: 1 } },
            { name: "broken", arguments: { q: "c" } },
            { name: "logs", arguments: { q: "api" } }
          ]),
          Scripted.text("The database is down.")
        ]],
        // the repeat guard warns, then halts
        [[
          ...Array.from({ length: 5 }, () => Scripted.toolCalls([{ name: "status", arguments: { q: "same" } }]))
        ]],
        // an empty reply, then a write that waits for approval
        [[Scripted.empty(), Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }])]],
        // provider faults: a retry after Retry-After, then failover to the second provider
        [
          [Scripted.fault("rate_limit", { retryAfterMs: 2_000 }), Scripted.fault("server"), Scripted.fault("server")],
          [Scripted.toolCalls([{ name: "status", arguments: { q: "x" } }]), Scripted.text("ok")]
        ]
      ])
      expect(saved.map((t) => t.exitReason)).toEqual([
        "bad_tool_use",
        "repeat_call_halt",
        "confirmation_pending",
        "completed"
      ])
      expect(saved.some((t) => t.errors.length > 0)).toBe(true)
      expect(saved.some((t) => t.toolCalls.some((c) => c.failure !== undefined))).toBe(true)
      expect(saved.some((t) => (t.decisions ?? []).some((d) => d._tag === "retry"))).toBe(true)
      expect(saved.every((t) => t.report !== undefined)).toBe(true)
      expectSame(read, saved)
    }))

  it.effect("reads back trajectories of many sessions sharing the store's templates", () =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.makeMemory
      const script = [[Scripted.toolCalls([{ name: "echo", arguments: { q: "a" } }]), Scripted.text("done")]]
      for (let n = 0; n < 5; n++) {
        const { read, saved } = yield* bursts(store, [script, script, script], `ses_many_${n}`)
        expectSame(read, saved)
      }
    }))

  it.effect.prop(
    "any two bursts read back as saved",
    { first: Arbitraries.route(Tools.names), second: Arbitraries.route(Tools.names) },
    ({ first, second }) =>
      Effect.gen(function*() {
        const { read, saved } = yield* bursts(yield* MemoryStore.makeMemory, [first, second])
        expectSame(read, saved)
      }),
    { fastCheck: { numRuns: 40 } }
  )
})

describe("packing", () => {
  const packer = () => Packing.make({ classes: [Usage], maxTemplates: 4 })

  it("unpacks what it packed: numbers of every kind, strings, nesting, prototypes, undefined fields", () => {
    const p = packer()
    const shared = Object.freeze({ kept: "by reference" })
    const values = [1, 2, 3].map((n) => ({
      id: `record-${n}`,
      at: 1_796_412_251_590 + n * 1_000,
      small: n,
      negative: -n * 12_345_678_901,
      fraction: n / 3,
      zero: n === 2 ? -0 : 0,
      nan: NaN,
      huge: n * Number.MAX_SAFE_INTEGER,
      absent: undefined,
      flag: n % 2 === 0,
      nothing: null,
      usage: new Usage({ inputTokens: n, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 }),
      shared,
      list: [{ a: n }, { a: 1, b: "x".repeat(40 + n) }],
      bare: Object.assign(Object.create(null) as object, { k: n }),
      date: new Date(n)
    }))
    const packed = values.map((v) => p.pack(v, v.id)!)
    packed.forEach((record, i) => {
      const back = p.unpack(record) as (typeof values)[number]
      expect(back).toStrictEqual(values[i])
      expect(Object.is(back.zero, values[i]!.zero)).toBe(true)
      expect(Object.keys(back)).toEqual(Object.keys(values[i]!))
      expect(back.shared).toBe(shared)
      expect(back.date).toBe(values[i]!.date)
      expect(Object.getPrototypeOf(back.bare)).toBe(null)
      expect(Packing.keyOf(record)).toBe(values[i]!.id)
    })
  })

  it("keeps a record as it is once its templates are all taken", () => {
    const p = packer()
    for (let n = 0; n < 4; n++) expect(p.pack({ [`k${n}`]: n }, n)).toBeDefined()
    expect(p.pack({ other: 1 }, 5)).toBeUndefined()
    expect(p.unpack(p.pack({ k3: 9 }, 6)!)).toEqual({ k3: 9 })
  })

  it("keeps long and deep values by reference, so a cyclic value packs", () => {
    const p = packer()
    const long = Array.from({ length: 300 }, (_, i) => i)
    const cyclic: Record<string, unknown> = { name: "loop" }
    cyclic["self"] = cyclic
    const back = p.unpack(p.pack({ long, cyclic }, 0)!) as { long: unknown; cyclic: Record<string, unknown> }
    expect(back.long).toBe(long)
    expect(back.cyclic["name"]).toBe("loop")
  })
})

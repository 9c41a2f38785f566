/**
 * Running a spec against a script in one call: the wiring every loop test and the demo share.
 *
 * `layer` builds the in-memory ports (store, live events, an in-process tool registry, scripted provider routes);
 * `runBurst` creates a session and runs one burst through the real lifecycle (`session/Run`), returning the landing
 * and the persisted transcript. Run it under `it.effect` and time is the TestClock's. `property` gives a property test
 * options that keep it inside vitest's default 5 s per test.
 */
import { Duration, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { AgentSpec } from "../domain/AgentSpec.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import { AgentId, SessionId } from "../domain/Ids.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import { Principal } from "../domain/Principal.js"
import { Scope } from "../domain/Scope.js"
import type { Session, SessionState } from "../domain/Session.js"
import { initialState } from "../domain/Session.js"
import * as LiveEvents from "../events/LiveEvents.js"
import type { SessionEvents } from "../events/SessionEvents.js"
import type { ModelProvider } from "../model/ModelProvider.js"
import { Providers } from "../model/ModelProvider.js"
import * as Run from "../session/Run.js"
import * as MemoryStore from "../store/MemoryStore.js"
import { SessionStore } from "../store/SessionStore.js"
import type { ToolExecutor } from "../tools/ToolExecutor.js"
import * as ToolRegistry from "../tools/ToolRegistry.js"

/** What `property` takes. */
export interface PropertyOptions {
  /** The most runs (default 100). */
  readonly numRuns?: number
  /** fast-check's seed, for a reproducible sequence of scripts. */
  readonly seed?: number
  /** How long the runs may take together (real time, default 2.5 s); no run starts after it. */
  readonly within?: Duration.DurationInput
}

/**
 * Options for `it.effect.prop` / `it.prop` (@effect/vitest) that keep a property test inside vitest's default 5 s
 * per test, on any machine, with no `timeout` to choose: fast-check makes up to `numRuns` runs and starts none once
 * `within` has passed since the first, then passes with the runs it made (a counterexample found in time fails as
 * always, shrunk). A run through `runScript` costs tens of milliseconds on an idle machine and several times that on
 * a loaded one, so a fixed count either wastes an idle machine's budget or overruns a busy one's timeout.
 */
export const property = (options: PropertyOptions = {}): {
  readonly fastCheck: {
    readonly numRuns: number
    readonly seed?: number
    readonly interruptAfterTimeLimit: number
    readonly markInterruptAsFailure: false
  }
} => ({
  fastCheck: {
    numRuns: options.numRuns ?? 100,
    ...(options.seed === undefined ? {} : { seed: options.seed }),
    interruptAfterTimeLimit: Duration.toMillis(options.within ?? Duration.millis(2_500)),
    markInterruptAsFailure: false
  }
})

/** The principal tests act as unless told otherwise. */
export const principal = new Principal({ orgId: "org_test", userId: "user_test" })

/** An agent spec for tests: every field has a sensible default; pass what the test is about. */
export const agent = (fields: Partial<ConstructorParameters<typeof AgentSpec>[0]> = {}): AgentSpec =>
  new AgentSpec({
    id: AgentId.make("test-agent"),
    version: 1,
    name: "Test agent",
    instructions: "Investigate the question with the tools, then answer.",
    ...fields
  })

/** A session row for `spec`, not yet stored. */
export const session = (
  spec: AgentSpec,
  options: { readonly id?: string; readonly scope?: string; readonly state?: SessionState; readonly by?: Principal } =
    {}
): Session => ({
  id: SessionId.make(options.id ?? "ses_test"),
  principal: options.by ?? principal,
  scope: Scope.make(options.scope ?? "incident:TEST-1"),
  agentId: spec.id,
  agentVersion: spec.version,
  createdAt: 0,
  updatedAt: 0,
  state: options.state ?? initialState
})

/** The in-memory ports: store, live events, tools, and the `default` tier routed to `providers`. */
export const layer = (options: {
  readonly providers: ReadonlyArray<ModelProvider>
  readonly tools?: ReadonlyArray<ToolRegistry.ToolHandler>
  readonly tiers?: Readonly<Record<string, ReadonlyArray<ModelProvider>>>
}): Layer.Layer<SessionStore | SessionEvents | ToolExecutor | Providers> =>
  Layer.mergeAll(
    LiveEvents.layer,
    ToolRegistry.layer(options.tools ?? []),
    Layer.succeed(Providers, Providers.fromRoutes({ default: options.providers, ...options.tiers }))
  ).pipe(Layer.provideMerge(MemoryStore.layerMemory))

/** The landing of one burst, plus the transcript as persisted. */
export interface BurstRun extends Run.Landed {
  readonly turns: ReadonlyArray<Turn>
  readonly session: Session
  /** The agent spec the burst ran with. */
  readonly spec: AgentSpec
}

/**
 * Creates (or reuses) the session in the store and runs one burst opened by `prompt`. Needs the ports of `layer`.
 * Fails only with `PersistenceFailed`.
 */
export const runBurst = (options: {
  readonly spec: AgentSpec
  readonly prompt?: string
  readonly session?: Session
  readonly history?: ReadonlyArray<TurnEntry>
}): Effect.Effect<BurstRun, PersistenceFailed, SessionStore | SessionEvents | ToolExecutor | Providers> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const row = options.session ?? session(options.spec)
    // The spec is stored like a published one: a stored session can then be replayed (`session/Replay`).
    yield* store.putAgent(row.principal.orgId, options.spec)
    const existing = yield* store.getSession(row.principal.orgId, row.id)
    if (existing._tag === "None") yield* store.createSession(row)
    const current = existing._tag === "Some" ? existing.value : row
    const landed = yield* Run.burst({
      session: current,
      spec: options.spec,
      history: options.history ?? [],
      opening: { kind: "user", text: options.prompt ?? "Why is checkout failing?" }
    })
    const turns = yield* store.turns(row.principal.orgId, row.id)
    return { ...landed, turns, session: { ...current, state: landed.state }, spec: options.spec }
  })

/**
 * Runs `self` to completion under the TestClock, moving time on in `step`s while it sleeps (backoffs, Retry-After,
 * timeouts, scripted delays). Dies if it has not finished after `maxSteps` steps.
 */
export const drive = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  options: { readonly step?: Duration.DurationInput; readonly maxSteps?: number } = {}
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(self)
    const maxSteps = options.maxSteps ?? 10_000
    for (let i = 0; i < maxSteps; i++) {
      if (Option.isSome(yield* Fiber.poll(fiber))) return yield* Fiber.join(fiber)
      yield* TestClock.adjust(options.step ?? "10 seconds")
    }
    return yield* Effect.dieMessage(`still running after ${maxSteps} clock steps`)
  })

/**
 * ProviderChain — one model call across a route of providers, with sticky failover (DESIGN §3 step 3).
 *
 * Walks the route from the session's sticky index. Each provider gets up to `maxAttempts` attempts, each under its
 * own timeout. The failure's kind alone decides what happens next (`disposition`): fail now (another provider
 * would get the same request, or the model itself answered "no"), fail over now (retrying cannot fix a key or a
 * bill), or retry after `Retry.delayFor` — the provider's Retry-After when it gave one and it fits under
 * `Limits.retryAfterCapMs`, jittered exponential backoff otherwise, and a Retry-After beyond the cap fails over at
 * once instead of parking the session. The index only moves forward and is written to the session's state when it
 * moves, so a provider that failed over stays skipped for the rest of the session; when every provider is spent
 * the state becomes `exhausted` and stays so: every later call fails `ProviderExhausted` without a request.
 *
 * Every attempt, failed or not, is reported through `onAttempt` with its usage: usage is charged whatever happened.
 * Retries, failovers, an attempt's wait at its provider's storm gate (`StormGuard.waitListener`) and a provider
 * that is not sent another provider's reasoning parts (`Reasoning`: `reasoning_dropped`, before its first attempt
 * of the call) are reported through `onDecision`.
 */
import type { Random } from "effect"
import { Clock, Context, Duration, Effect, Either, Option, Ref, Runtime } from "effect"
import { disposition } from "../domain/ErrorKind.js"
import { ProviderError, ProviderExhausted } from "../domain/Errors.js"
import type { ModelReply } from "../domain/Message.js"
import type { RailDecision } from "../domain/Trajectory.js"
import { Usage } from "../domain/Usage.js"
import * as SyncFirst from "../internal/syncFirst.js"
import { Limits } from "../rails/Limits.js"
import * as Retry from "../rails/Retry.js"
import * as GenAi from "../telemetry/GenAi.js"
import type { ModelProvider, ModelRequest } from "./ModelProvider.js"
import { describe, withProvider } from "./ProviderError.js"
import * as Reasoning from "./Reasoning.js"
import * as StormGuard from "./StormGuard.js"

/** A session's failover position: the provider to start from, and whether the whole route is spent (sticky). */
export interface ChainState {
  readonly index: number
  readonly exhausted: boolean
}

/** The state of a session that has not failed over yet. */
export const initialState: ChainState = { index: 0, exhausted: false }

/** One attempt on one provider, reported whatever its outcome: exactly one of `reply` / `error` is set. */
export interface AttemptRecord {
  readonly provider: string
  /** 1-based attempt number on this provider within this call. */
  readonly attempt: number
  /** Clock time (epoch ms) when the attempt started. */
  readonly startedAt: number
  readonly durationMs: number
  readonly reply?: ModelReply
  readonly error?: ProviderError
  /** What the attempt cost: the reply's usage, the error's usage, or zero. */
  readonly usage: Usage
}

/** What `callModel` needs: the route, the session's sticky state, the request, and the per-attempt hook. */
export interface CallOptions {
  readonly providers: ReadonlyArray<ModelProvider>
  /** The session's sticky failover state; the chain moves `index` forward and sets `exhausted`. */
  readonly state: Ref.Ref<ChainState>
  readonly request: ModelRequest
  /** Called after EVERY attempt, success or failure (the loop charges usage and records the trajectory here). */
  readonly onAttempt: (record: AttemptRecord) => Effect.Effect<void>
  /** Called for every retry and failover, with the numbers behind it (the trajectory's rail decisions). */
  readonly onDecision?: (decision: RailDecision) => Effect.Effect<void>
  /** The Retry-After cap: the burst's effective `retryAfterCapMs`; absent, the `Limits` in context. */
  readonly retryAfterCapMs?: number
  /** Where the backoff jitter comes from (a burst's seeded `Random`, so a replay draws the same delays). */
  readonly random?: Random.Random
}

/** A successful call: the reply and the provider that gave it. */
export interface CallResult {
  readonly reply: ModelReply
  readonly provider: ModelProvider
}

const exhausted = (last: ProviderError | undefined): ProviderExhausted =>
  new ProviderExhausted({
    message: last === undefined
      ? "every provider of the route is spent"
      : `every provider of the route is spent; last failure: ${describe(last)}`,
    ...(last !== undefined ? { last } : {})
  })

const timedOut = (provider: ModelProvider): ProviderError =>
  new ProviderError({
    kind: "timeout",
    provider: provider.name,
    message: `no reply from ${provider.name} within ${provider.timeoutMs} ms`
  })

// Moves the sticky index forward only: `Math.max` keeps the invariant even if two calls race on one state.
const advanceTo = (state: Ref.Ref<ChainState>, index: number) =>
  Ref.update(state, (current) => index > current.index ? { ...current, index } : current)

/** One attempt under its own timeout, reported through `onAttempt`; the outcome as an Either so the walk decides. */
const attemptOnce = (
  provider: ModelProvider,
  attempt: number,
  options: CallOptions
): Effect.Effect<Either.Either<ModelReply, ProviderError>> =>
  // One operation for the fiber, its clock and the attempt's span (`GenAi.attemptIn`).
  Effect.withFiberRuntime((fiber) =>
    attemptOn(Context.get(fiber.currentDefaultServices, Clock.Clock), provider, attempt, options).pipe(
      GenAi.attemptIn(fiber, provider, attempt)
    )
  )

// Generator functions made once (`fnUntraced`), not per attempt or call: see session/Loop's `iteration`.
const attemptOn = Effect.fnUntraced(function*(
  clock: Clock.Clock,
  provider: ModelProvider,
  attempt: number,
  options: CallOptions
) {
  const startedAt = clock.unsafeCurrentTimeMillis()
  const heard = options.onDecision
  // Sync-first: a provider that answers without suspending costs no fork and no timer; one that suspends is
  // joined under its timeout as before.
  const outcome = yield* SyncFirst.within(
    provider.complete(options.request),
    provider.timeoutMs,
    () => timedOut(provider),
    // A wait in the provider's storm line (StormGuard) is a rail decision of this call: its listener is set on
    // the attempt's own fiber as that starts.
    heard === undefined ?
      undefined :
      (runtime) =>
        Runtime.setFiberRef(runtime, StormGuard.waitListener, (wait: StormGuard.Wait) =>
          heard({
            _tag: "storm_wait",
            at: wait.releasedAt,
            provider: wait.provider,
            waitMs: wait.releasedAt - wait.arrivedAt
          }))
  ).pipe(
    Effect.mapError((error) => withProvider(error, provider.name)),
    Effect.either
  )
  const durationMs = clock.unsafeCurrentTimeMillis() - startedAt
  const base = { provider: provider.name, attempt, startedAt, durationMs }
  yield* options.onAttempt(
    Either.isRight(outcome)
      ? { ...base, reply: outcome.right, usage: outcome.right.usage }
      : { ...base, error: outcome.left, usage: outcome.left.usage ?? Usage.zero }
  )
  return outcome
})

/**
 * Calls the model through the route, retrying and failing over per the classification rules (module comment).
 * Succeeds with the first reply and the provider that gave it. Fails with the `ProviderError` itself for a
 * fail-now kind (`context_overflow`, `bad_request`, `refused`, `filtered`; the index is unchanged), or with
 * `ProviderExhausted` (carrying the last `ProviderError`) when the route is empty, already exhausted, or spent by
 * this call — the state is then marked exhausted, for good. Sleeps and timeouts use `Clock`, so TestClock drives
 * them; a provider defect propagates as a defect.
 */
export const callModel = (options: CallOptions): Effect.Effect<CallResult, ProviderError | ProviderExhausted> =>
  GenAi.chat(options, walk)

const walk: (options: CallOptions) => Effect.Effect<CallResult, ProviderError | ProviderExhausted> = Effect
  .fnUntraced(function*(options: CallOptions) {
    const start = yield* Ref.get(options.state)
    if (start.exhausted) {
      return yield* Effect.fail(
        new ProviderExhausted({ message: "every provider of the route was spent earlier in this session" })
      )
    }
    const retryAfterCapMs = options.retryAfterCapMs ?? (yield* Limits).retryAfterCapMs
    const decide = options.onDecision ?? (() => Effect.void)
    let last: ProviderError | undefined

    for (let index = start.index; index < options.providers.length; index++) {
      const provider = options.providers[index]
      if (provider === undefined) continue
      if (index !== start.index) yield* advanceTo(options.state, index)
      const attempts = Math.max(1, Math.floor(provider.maxAttempts))
      const foreign = Reasoning.foreignParts(options.request.messages, provider.name)
      if (foreign > 0) {
        yield* decide({
          _tag: "reasoning_dropped",
          at: yield* Clock.currentTimeMillis,
          provider: provider.name,
          parts: foreign
        })
      }

      for (let attempt = 1; attempt <= attempts; attempt++) {
        const outcome = yield* attemptOnce(provider, attempt, options)
        if (Either.isRight(outcome)) return { reply: outcome.right, provider }
        const error = outcome.left
        last = error
        const next = disposition(error.kind)
        if (next === "fail_now") return yield* Effect.fail(error)
        const at = yield* Clock.currentTimeMillis
        const failover = (retryAfterMs?: number) =>
          decide({
            _tag: "failover",
            at,
            from: provider.name,
            kind: error.kind,
            ...(options.providers[index + 1] === undefined ? {} : { to: options.providers[index + 1]!.name }),
            ...(retryAfterMs === undefined ? {} : { retryAfterMs })
          })
        if (next === "fail_over" || attempt === attempts) {
          yield* failover()
          break
        }
        const jitter = Retry.delayFor(attempt, error.retryAfterMs, retryAfterCapMs)
        const delay = yield* options.random === undefined ? jitter : Effect.withRandom(jitter, options.random)
        // A Retry-After beyond the cap: waiting would park the session, the next provider may answer now.
        if (Option.isNone(delay)) {
          yield* failover(error.retryAfterMs)
          break
        }
        yield* decide({
          _tag: "retry",
          at,
          provider: provider.name,
          attempt,
          kind: error.kind,
          delayMs: Duration.toMillis(delay.value),
          ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs })
        })
        yield* Effect.sleep(delay.value)
      }
    }

    yield* Ref.update(options.state, (current) => ({ ...current, exhausted: true }))
    return yield* Effect.fail(exhausted(last))
  })

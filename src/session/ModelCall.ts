/**
 * One gated model call: the only road from the loop to a model.
 *
 * Every call — the first of an iteration, the single retry after a context-overflow prune and the landing's
 * finalize alike — passes the same gate: the exit policy's `before_model` checks (the deadline, spent providers,
 * both model-call ceilings, the token budget, and any own checks), asked in the policy's order. Then BOTH counters
 * increment and the provider chain runs. No path reaches the model without incrementing both.
 */
import { Clock, Effect, Option, Ref, Runtime } from "effect"
import type { ModelReply } from "../domain/Message.js"
import { Usage } from "../domain/Usage.js"
import type { ModelRequest } from "../model/ModelProvider.js"
import * as ProviderChain from "../model/ProviderChain.js"
import * as Budget from "../rails/Budget.js"
import * as Counters from "../rails/Counters.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as Prune from "../rails/Prune.js"
import * as Burst from "./Burst.js"
import * as Prompt from "./Prompt.js"

/** A reply to act on, or what ends the burst. */
export type Outcome =
  | { readonly _tag: "Reply"; readonly reply: ModelReply }
  | { readonly _tag: "Exit"; readonly decision: ExitPolicy.Decision }

const exit = (decision: ExitPolicy.Decision): Outcome => ({ _tag: "Exit", decision })

/** The gate of DESIGN §3 step 2: the exit policy's `before_model` checks (cancel is the burst's race). */
const gate = (ctx: Burst.Context, burst: Burst.Burst): Effect.Effect<Option.Option<ExitPolicy.Decision>> =>
  Effect.zipWith(
    Ref.get(burst.chain),
    Clock.currentTimeMillis,
    (chain, now) => ExitPolicy.decide(ctx.policy, "before_model", Burst.facts(ctx, burst, chain.exhausted, now))
  )

const attempt = (ctx: Burst.Context, burst: Burst.Burst, request: ModelRequest) =>
  Effect.gen(function*() {
    const blocked = yield* gate(ctx, burst)
    if (Option.isSome(blocked)) return yield* Effect.fail(blocked.value)
    burst.counters = Counters.increment(burst.counters)
    Burst.snapshot(burst, yield* Clock.currentTimeMillis)
    const messages = request.messages
    const { reply } = yield* ProviderChain.callModel({
      providers: ctx.providers,
      state: burst.chain,
      request,
      retryAfterCapMs: ctx.limits.retryAfterCapMs,
      random: burst.random,
      onDecision: (decision) => Effect.sync(() => Burst.decided(burst, decision)),
      onAttempt: (record) =>
        Effect.sync(() => {
          // Usage is charged whatever happened: a storm of failed attempts still spends the token budget.
          burst.usage = Usage.add(burst.usage, record.usage)
          burst.budget = Budget.chargeTokens(burst.budget, record.usage)
          burst.attempts.push({
            provider: record.provider,
            attempt: record.attempt,
            startedAt: record.startedAt,
            durationMs: record.durationMs,
            request: { messages: messages.length, tools: request.tools.length },
            ...(record.reply === undefined ? {} : { reply: record.reply }),
            ...(record.error === undefined ? {} : {
              error: {
                kind: record.error.kind,
                message: record.error.message,
                ...(record.error.status === undefined ? {} : { status: record.error.status }),
                ...(record.error.retryAfterMs === undefined ? {} : { retryAfterMs: record.error.retryAfterMs })
              }
            }),
            usage: record.usage
          })
          if (record.error !== undefined) {
            burst.errors.push({ code: `provider.${record.error.kind}`, message: record.error.message })
          }
        }).pipe(
          // Recorded as it happens: a process that dies during the next attempt keeps this one and its usage.
          Effect.zipRight(Effect.suspend(() => burst.touch))
        )
    })
    return reply
  })

/**
 * Calls the model for the next step. Exits: a `before_model` check of the exit policy (the deadline, spent
 * providers, the ceilings, the token budget, own checks), or a provider failure as `ExitPolicy.providerExit` maps
 * it: `refused` / `filtered` (raised by the provider), `context_overflow` (after the one prune-and-retry), and
 * `provider_failed` (the route spent by this call, or a request the provider rejected as malformed: not sticky).
 */
export const next = (ctx: Burst.Context, burst: Burst.Burst): Effect.Effect<Outcome> =>
  Effect.flatMap(Effect.runtime<never>(), (runtime) =>
    attempt(ctx, burst, {
      system: Prompt.system(ctx.spec),
      // A snapshot: the burst keeps appending to its own list, and providers may keep the request.
      messages: burst.messages.slice(),
      tools: ctx.toolSpecs,
      // Streamed text reaches subscribers as it arrives (unpersisted); the assembled reply is what gets persisted.
      onDelta: (text) =>
        Runtime.runSync(runtime)(
          ctx.ports.events.publish({ _tag: "delta", sessionId: ctx.session.id, seq: burst.lastSeq, text })
        )
    })).pipe(
      Effect.map((reply): Outcome => ({ _tag: "Reply", reply })),
      Effect.catchAll((failure): Effect.Effect<Outcome> => {
        // The gate closed: a check of the exit policy.
        if ("check" in failure) return Effect.succeed(exit(failure))
        if (failure._tag === "ProviderExhausted") {
          return Effect.succeed(exit({ check: "ProviderChain", reason: "provider_failed", notice: failure.message }))
        }
        const reason = ExitPolicy.providerExit(failure.kind)
        if (reason === "prune") return pruneAndRetry(ctx, burst)
        return Effect.succeed(exit({ check: "ProviderChain", reason, notice: `${failure.kind}: ${failure.message}` }))
      })
    )

/**
 * A call outside the loop's step (the landing's finalize), through the same gate and the same accounting.
 * `None` when the gate is closed or the call failed: the caller falls back.
 */
export const extra = (
  ctx: Burst.Context,
  burst: Burst.Burst,
  request: ModelRequest
): Effect.Effect<Option.Option<ModelReply>> => attempt(ctx, burst, request).pipe(Effect.option)

const overflow = (notice: string) => exit({ check: "Prune", reason: "context_overflow", notice })

/** Exactly one mechanical prune per burst, then one retry; never re-send an identical request. */
const pruneAndRetry = (ctx: Burst.Context, burst: Burst.Burst): Effect.Effect<Outcome> =>
  Effect.flatMap(Clock.currentTimeMillis, (at) => {
    if (burst.pruned) return Effect.succeed(overflow("the context overflowed again after the burst's one prune"))
    burst.pruned = true
    const pruned = Prune.prune(burst.messages)
    Burst.decided(burst, { _tag: "prune", at, pruned: Option.isSome(pruned) })
    if (Option.isNone(pruned)) return Effect.succeed(overflow("the context overflowed and nothing could be pruned"))
    burst.messages = pruned.value.slice()
    return next(ctx, burst)
  })

/**
 * One gated model call: the only road from the loop to a model.
 *
 * Every call — the first of an iteration and the single retry after a context-overflow prune alike — passes the
 * same gate: providers not exhausted, both model-call ceilings have room, the token budget has room. Then BOTH
 * counters increment and the provider chain runs. No path reaches the model without incrementing both.
 */
import { Clock, Effect, Option, Ref, Runtime } from "effect"
import type { ExitReason } from "../domain/ExitReason.js"
import type { ModelReply } from "../domain/Message.js"
import { Usage } from "../domain/Usage.js"
import type { ModelRequest } from "../model/ModelProvider.js"
import * as ProviderChain from "../model/ProviderChain.js"
import * as Budget from "../rails/Budget.js"
import * as Counters from "../rails/Counters.js"
import * as Prune from "../rails/Prune.js"
import * as Burst from "./Burst.js"
import * as Prompt from "./Prompt.js"

/** A reply to act on, or the reason the burst must end. */
export type Outcome =
  | { readonly _tag: "Reply"; readonly reply: ModelReply }
  | { readonly _tag: "Exit"; readonly reason: ExitReason }

const exit = (reason: ExitReason): Outcome => ({ _tag: "Exit", reason })

/** The gate of DESIGN §3 step 2 (after cancel and deadline, which the loop checks). */
const gate = (ctx: Burst.Context, burst: Burst.Burst): Effect.Effect<Option.Option<ExitReason>> =>
  Effect.map(Ref.get(burst.chain), (chain) => {
    if (chain.exhausted) return Option.some<ExitReason>("provider_failed")
    const ceiling = Counters.check(burst.counters, ctx.limits)
    if (Option.isSome(ceiling)) return ceiling
    if (Budget.tokensExhausted(burst.budget, ctx.limits)) return Option.some<ExitReason>("token_budget")
    return Option.none()
  })

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
 * Calls the model for the next step. Exits: `provider_failed` (exhausted, now or before), ceilings, `token_budget`,
 * `refused` / `filtered` (raised by the provider), `context_overflow` (after the one prune-and-retry), and
 * `provider_failed` for a request the provider rejected as malformed (recorded; not sticky).
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
        if (typeof failure === "string") return Effect.succeed(exit(failure))
        if (failure._tag === "ProviderExhausted") return Effect.succeed(exit("provider_failed"))
        switch (failure.kind) {
          case "context_overflow":
            return pruneAndRetry(ctx, burst)
          case "refused":
            return Effect.succeed(exit("refused"))
          case "filtered":
            return Effect.succeed(exit("filtered"))
          default:
            return Effect.succeed(exit("provider_failed"))
        }
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

/** Exactly one mechanical prune per burst, then one retry; never re-send an identical request. */
const pruneAndRetry = (ctx: Burst.Context, burst: Burst.Burst): Effect.Effect<Outcome> => {
  if (burst.pruned) return Effect.succeed(exit("context_overflow"))
  burst.pruned = true
  const pruned = Prune.prune(burst.messages)
  if (Option.isNone(pruned)) return Effect.succeed(exit("context_overflow"))
  burst.messages = pruned.value.slice()
  return next(ctx, burst)
}

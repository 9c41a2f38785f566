/**
 * One gated model call: the only road from the loop to a model.
 *
 * Every call — the first of an iteration, the single retry after a context-overflow prune and the landing's
 * finalize alike — passes the same gate: the exit policy's `before_model` checks (the deadline, spent providers,
 * both model-call ceilings, the token budget, and any own checks), asked in the policy's order. Then BOTH counters
 * increment and the provider chain runs. No path reaches the model without incrementing both — a tool server's
 * sample (MCP sampling, `sample`) included: it is a model call of the session and counts against its ceilings.
 */
import { Clock, Deferred, Effect, Exit, FiberId, Option, Ref } from "effect"
import { SampleRefused } from "../domain/Errors.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { ModelReply, TurnEntry } from "../domain/Message.js"
import { Usage } from "../domain/Usage.js"
import type { ModelRequest } from "../model/ModelProvider.js"
import * as ProviderChain from "../model/ProviderChain.js"
import * as Budget from "../rails/Budget.js"
import * as Cost from "../rails/Cost.js"
import * as Counters from "../rails/Counters.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as OrgBudget from "../rails/OrgBudget.js"
import * as Prune from "../rails/Prune.js"
import type { Sampler, SampleReply, SampleRequest } from "../tools/ToolExecutor.js"
import * as Burst from "./Burst.js"
import type * as OrgGate from "./OrgGate.js"
import * as Prompt from "./Prompt.js"

/** The prices of the route's provider named `name` (the attempt records name it). */
const priceOf = (ctx: Burst.Context, name: string): Cost.Prices | undefined => {
  for (const provider of ctx.providers) if (provider.name === name) return provider.pricing
  return undefined
}

/** A reply to act on, or what ends the burst. */
export type Outcome =
  | { readonly _tag: "Reply"; readonly reply: ModelReply }
  | { readonly _tag: "Exit"; readonly decision: ExitPolicy.Decision }

const exit = (decision: ExitPolicy.Decision): Outcome => ({ _tag: "Exit", decision })

/** What the gate decided: the call may go (with its output cap lowered to fit a cost budget), or the burst ends. */
type Gate =
  | { readonly _tag: "Pass"; readonly request: ModelRequest }
  | { readonly _tag: "Blocked"; readonly decision: ExitPolicy.Decision }

/**
 * The gate of DESIGN §3 step 2: the exit policy's `before_model` checks (cancel is the burst's race), then the cost
 * budget's worst case (`Cost.fit`: the call is sent with its output cap lowered to fit what is left, or not made),
 * and BOTH counters incremented when it passes. The checks and the increment are one synchronous step: a tool
 * server's samples run concurrently (the calls of a turn do), and two of them must never both pass a gate with room
 * for one.
 */
const gate = (
  ctx: Burst.Context,
  burst: Burst.Burst,
  request: ModelRequest,
  orgCap: number | undefined
): Effect.Effect<Gate> =>
  Effect.flatMap(Ref.get(burst.chain), (chain) =>
    Effect.clockWith((clock) =>
      Effect.sync((): Gate => {
        const now = clock.unsafeCurrentTimeMillis()
        const facts = Burst.facts(ctx, burst, chain.exhausted, now)
        const blocked = ExitPolicy.decide(ctx.policy, "before_model", facts)
        if (Option.isSome(blocked)) return { _tag: "Blocked", decision: blocked.value }
        let sent = request
        if (Cost.bounded(ctx.limits)) {
          const left = Cost.remaining(ctx.limits, facts.costBurst, facts.costSession)
          const prices = pricesFrom(ctx, chain.index)
          const characters = ctx.promptChars + JSON.stringify(request.messages).length
          const fit = Cost.fit(prices, left, Cost.estimateTokens(characters), request.maxTokens)
          if (fit._tag === "None") {
            return {
              _tag: "Blocked",
              decision: {
                check: ExitPolicy.costBudget.name,
                reason: "cost_budget",
                notice: `the next call's input alone would cross the cost budget: ${left} micro-dollars left`
              }
            }
          }
          if (fit.maxTokens !== undefined && fit.maxTokens !== request.maxTokens) {
            sent = { ...request, maxTokens: fit.maxTokens }
            Burst.decided(burst, { _tag: "cost_cap", at: now, maxTokens: fit.maxTokens, leftMicros: left })
          }
        }
        // The org's grant (`hold`), when it allows less than the burst's own budgets do.
        if (orgCap !== undefined && (sent.maxTokens === undefined || orgCap < sent.maxTokens)) {
          sent = { ...sent, maxTokens: orgCap }
        }
        burst.counters = Counters.increment(burst.counters)
        Burst.snapshot(burst, now)
        return { _tag: "Pass", request: sent }
      })
    ))

/** The prices the call may meet: the route's from the sticky index on. */
const pricesFrom = (ctx: Burst.Context, index: number): Array<Cost.Prices> =>
  ctx.providers.slice(index).flatMap((p) => p.pricing === undefined ? [] : [p.pricing])

/** What the org's budget decided: no hold needed, the call's hold and its output cap, or the burst ends. */
type OrgHold =
  | { readonly _tag: "Free" }
  | { readonly _tag: "Held"; readonly hold: OrgGate.Hold; readonly maxTokens: number }
  | { readonly _tag: "Blocked"; readonly decision: ExitPolicy.Decision }

const free: OrgHold = { _tag: "Free" }

/**
 * Holds the call's worst case in the org's daily budget (`OrgGate`, `rails/OrgBudget`) before the gate: its input
 * estimate plus its output cap (the request's, else the route's `maxOutputTokens`, lowered to the burst's cost fit)
 * at the highest prices it may meet. A grant short of it lowers the cap to fit (an `org_budget` decision). A grant
 * too small for the call while the room is only HELD by the org's calls in flight (they will settle, mostly under
 * their worst case) waits for them, up to `OrgBudget.holdWaitMs`; too small with the day's budget spent, or after that
 * wait, ends the burst `cost_budget`. Runs before the synchronous gate so that the gate's checks and its counter
 * increment stay one step; a call the gate then blocks releases its hold unspent.
 */
const holdFor = (
  ctx: Burst.Context,
  burst: Burst.Burst,
  request: ModelRequest
): Effect.Effect<OrgHold, PersistenceFailed> =>
  ctx.org === undefined ? Effect.succeed(free) : Effect.gen(function*() {
    const org = ctx.org!
    const chain = yield* Ref.get(burst.chain)
    const first = yield* Clock.currentTimeMillis
    const prices = pricesFrom(ctx, chain.index)
    const inputTokens = Cost.estimateTokens(ctx.promptChars + JSON.stringify(request.messages).length)
    const facts = Burst.facts(ctx, burst, chain.exhausted, first)
    const cap = request.maxTokens ??
      Math.max(...ctx.providers.slice(chain.index).map((p) => p.maxOutputTokens ?? OrgBudget.uncappedOutputTokens))
    const fit = Cost.fit(prices, Cost.remaining(ctx.limits, facts.costBurst, facts.costSession), inputTokens, cap)
    // The burst's own budget blocks this call: the gate says so, in the policy's order.
    if (fit._tag === "None") return free
    const maxTokens = fit.maxTokens ?? cap
    const want = Cost.worstCase(prices, inputTokens, maxTokens)
    if (want === 0) return free
    const call = burst.counters.burst + 1
    let hold = yield* org.hold(want, call, first)
    // A replay's hold takes the recorded wait itself.
    let now = hold.final === true ? yield* Clock.currentTimeMillis : first
    for (let pause = 50; hold.granted < want; pause = Math.min(1_000, pause * 2)) {
      const granted = Cost.fit(prices, hold.granted, inputTokens, maxTokens)
      const roomIfSettled = org.perDay - hold.tally.spentMicros >= Cost.worstCase(prices, inputTokens, 1)
      const waiting = hold.final !== true && granted._tag === "None" && roomIfSettled &&
        now - first < OrgBudget.holdWaitMs
      if (!waiting) {
        Burst.decided(burst, {
          _tag: "org_budget",
          at: now,
          call,
          wantMicros: want,
          grantedMicros: hold.granted,
          spentMicros: hold.tally.spentMicros,
          heldMicros: hold.tally.heldMicros,
          waitedMs: now - first
        })
        if (granted._tag === "Fits") return { _tag: "Held", hold, maxTokens: granted.maxTokens ?? maxTokens }
        yield* org.settle(hold, 0)
        return { _tag: "Blocked", decision: orgExhausted(org, hold) }
      }
      yield* org.settle(hold, 0)
      yield* Effect.sleep(pause)
      now = yield* Clock.currentTimeMillis
      hold = yield* org.hold(want, call, now)
    }
    return { _tag: "Held", hold, maxTokens }
  })

const orgExhausted = (org: OrgGate.OrgGate, hold: OrgGate.Hold): ExitPolicy.Decision => ({
  check: "OrgBudget",
  reason: "cost_budget",
  notice: hold.tally.spentMicros >= org.perDay
    ? OrgBudget.exhaustedMessage(org.orgId, org.perDay, hold.tally.spentMicros, hold.resetsAt)
    : `org "${org.orgId}" has ${Math.max(0, org.perDay - hold.tally.spentMicros)} micro-dollars of its daily ` +
      `budget of ${org.perDay} left, ${hold.tally.heldMicros} of them held by its calls in flight, too little for the ` +
      `next call's input after waiting ${OrgBudget.holdWaitMs / 1000} s; it resets at ` +
      new Date(hold.resetsAt).toISOString()
})

/**
 * The tool call a sampler serves: its id, whether it has ended, and how many of its samples passed the gate. Every
 * tool call has one; the signal its samples wait on (`over`) is made only when a sample asks for it — making a
 * `Deferred` costs more than the rest of a synchronous tool call, and most calls never sample.
 */
export interface SampleSlot {
  readonly callId: string
  /** Whether the call has ended (`endSlot`), however it ended: its samples stop. */
  ended: boolean
  /** Done when the call ends; made by the first sample that waits on it (`overOf`). */
  over: Deferred.Deferred<void> | undefined
  /** Samples that passed the gate (`ToolCallRecord.samples`). */
  passed: number
}

/** A new slot for the tool call `callId`. */
export const slotFor = (callId: string): SampleSlot => ({ callId, ended: false, over: undefined, passed: 0 })

/** Marks the slot's call ended: a sample waiting on it stops, and a later one is refused at once. */
export const endSlot = (slot: SampleSlot): void => {
  slot.ended = true
  if (slot.over !== undefined) Deferred.unsafeDone(slot.over, Exit.void)
}

const overOf = (slot: SampleSlot): Deferred.Deferred<void> => {
  if (slot.over === undefined) slot.over = Deferred.unsafeMake(FiberId.none)
  return slot.over
}

/**
 * `sampleOf`: the tool call whose server asked for this call (a sample), recorded on each of its attempts. Its
 * generator function is made once (`fnUntraced`), not per call: see Loop's `iteration`.
 */
const attempt = Effect.fnUntraced(function*(
  ctx: Burst.Context,
  burst: Burst.Burst,
  asked: ModelRequest,
  sampleOf?: SampleSlot
) {
  // Without an org budget, nothing is asked of the store and nothing added to the call.
  const org = ctx.org === undefined ? free : yield* holdFor(ctx, burst, asked)
  if (org._tag === "Blocked") return yield* Effect.fail(org.decision)
  const passed = yield* gate(ctx, burst, asked, org._tag === "Held" ? org.maxTokens : undefined)
  if (passed._tag === "Blocked") {
    if (org._tag === "Held") yield* ctx.org!.settle(org.hold, 0)
    return yield* Effect.fail(passed.decision)
  }
  const request = passed.request
  /** What this call's attempts cost: the org's spend when it settles. */
  let spent = 0
  // Numbered once past the gate: a refused sample made no model call, so a replay has nothing of it to ask again.
  const sampled = sampleOf === undefined ? undefined : {
    callId: sampleOf.callId,
    n: (burst.samples.get(sampleOf.callId) ?? 0) + 1
  }
  if (sampleOf !== undefined && sampled !== undefined) {
    sampleOf.passed += 1
    burst.samples.set(sampled.callId, sampled.n)
  }
  const messages = request.messages
  return yield* ProviderChain.callModel({
    providers: ctx.providers,
    state: burst.chain,
    request,
    retryAfterCapMs: ctx.limits.retryAfterCapMs,
    random: burst.random,
    onDecision: (decision) =>
      Effect.sync(() => {
        // Once per provider and burst: every later call of the burst leaves out the same parts, and more.
        if (decision._tag === "reasoning_dropped") {
          if (burst.dropsReported.has(decision.provider)) return
          burst.dropsReported.add(decision.provider)
        }
        Burst.decided(burst, decision)
      }),
    onAttempt: (record) =>
      Effect.sync(() => {
        // Usage is charged whatever happened: a storm of failed attempts still spends the token budget, and money.
        burst.usage = Usage.add(burst.usage, record.usage)
        burst.budget = Budget.chargeTokens(burst.budget, record.usage)
        const pricing = priceOf(ctx, record.provider)
        const costMicros = pricing === undefined ? undefined : Cost.micros(pricing, record.usage)
        if (costMicros !== undefined) {
          burst.cost += costMicros
          burst.priced = true
          spent += costMicros
        }
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
          usage: record.usage,
          ...(costMicros === undefined ? {} : { costMicros }),
          ...(sampled === undefined ? {} : { sampled })
        })
        if (record.error !== undefined) {
          burst.errors.push({ code: `provider.${record.error.kind}`, message: record.error.message })
        }
        // Recorded as it happens: a process that dies during the next attempt keeps this one and its usage.
        burst.touch()
      })
  }).pipe((call) =>
    org._tag === "Held"
      // However the call ended (a reply, a failure, the burst's cancel), what its attempts cost is the org's.
      ? Effect.ensuring(call, Effect.suspend(() => ctx.org!.settle(org.hold, spent)))
      : call
  )
})

/**
 * Calls the model for the next step. Exits: a `before_model` check of the exit policy (the deadline, spent
 * providers, the ceilings, the token budget, own checks), or a provider failure as `ExitPolicy.providerExit` maps
 * it: `refused` / `filtered` (raised by the provider), `context_overflow` (after the one prune-and-retry), and
 * `provider_failed` (the route spent by this call, or a request the provider rejected as malformed: not sticky).
 */
export const next = (ctx: Burst.Context, burst: Burst.Burst): Effect.Effect<Outcome, PersistenceFailed> =>
  Effect.suspend(() =>
    attempt(ctx, burst, {
      system: Prompt.system(ctx.spec),
      // A snapshot: the burst keeps appending to its own list, and providers may keep the request.
      messages: burst.messages.slice(),
      tools: ctx.toolSpecs,
      // One session's calls share a prompt-cache key: their prefixes (tools, system, earlier turns) are identical.
      cacheKey: ctx.session.id,
      // Streamed text reaches subscribers as it arrives (unpersisted); the assembled reply is what gets persisted.
      // Publishing needs no service (the port's effect requires none), so it runs on its own without the burst's
      // runtime, which a reply that streams nothing would capture for nothing.
      onDelta: (text) =>
        Effect.runSync(
          ctx.ports.events.publish({ _tag: "delta", sessionId: ctx.session.id, seq: burst.lastSeq, text })
        )
    })
  ).pipe(
    Effect.map(({ reply }): Outcome => ({ _tag: "Reply", reply })),
    Effect.catchAll((failure): Effect.Effect<Outcome, PersistenceFailed> => {
      // The gate closed: a check of the exit policy.
      if ("check" in failure) return Effect.succeed(exit(failure))
      // The org's budget could not be read: the store stops the burst as it would at its next write.
      if (failure._tag === "PersistenceFailed") return Effect.fail(failure)
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
): Effect.Effect<Option.Option<ModelReply>> =>
  attempt(ctx, burst, request).pipe(Effect.map(({ reply }) => reply), Effect.option)

const overflow = (notice: string) => exit({ check: "Prune", reason: "context_overflow", notice })

/** Exactly one mechanical prune per burst, then one retry; never re-send an identical request. */
const pruneAndRetry = (ctx: Burst.Context, burst: Burst.Burst): Effect.Effect<Outcome, PersistenceFailed> =>
  Effect.flatMap(Clock.currentTimeMillis, (at) => {
    if (burst.pruned) return Effect.succeed(overflow("the context overflowed again after the burst's one prune"))
    burst.pruned = true
    const pruned = Prune.prune(burst.messages)
    Burst.decided(burst, { _tag: "prune", at, pruned: Option.isSome(pruned) })
    if (Option.isNone(pruned)) return Effect.succeed(overflow("the context overflowed and nothing could be pruned"))
    burst.messages = pruned.value.slice()
    return next(ctx, burst)
  })

/** The first stop sequence in `text`: the text before it. Adapters may not send them, so the cut is made here too. */
const cutAtStop = (text: string, stops: ReadonlyArray<string> | undefined): string | undefined => {
  let at = -1
  for (const stop of stops ?? []) {
    const i = stop === "" ? -1 : text.indexOf(stop)
    if (i >= 0 && (at < 0 || i < at)) at = i
  }
  return at < 0 ? undefined : text.slice(0, at)
}

const stopReasonOf = (finish: ModelReply["finishReason"]): string =>
  finish === "stop" ? "endTurn" : finish === "length" ? "maxTokens" : finish

/** A sample's conversation as a model request: the server's own system prompt (or none), no tools. */
const sampleRequest = (request: SampleRequest): ModelRequest => ({
  system: request.system ?? "",
  messages: request.messages.map((m): TurnEntry =>
    m.role === "user"
      ? { kind: "user", text: m.text }
      : { kind: "assistant", text: m.text, toolCalls: [], finishReason: "stop" }
  ),
  tools: [],
  maxTokens: request.maxTokens,
  ...(request.stopSequences === undefined ? {} : { stopSequences: request.stopSequences })
})

/**
 * The sampler of the tool call in `slot` (`ToolContext.sample`): a tool server's sample is a model call of the session,
 * so it takes the same road as the loop's — the exit policy's `before_model` checks, BOTH counters, the token budget,
 * the provider chain (sticky index, retries, failover; spending the route is sticky here too) — and its attempts are
 * recorded with `sampled`. The server's conversation never enters the session's transcript, and the agent's system
 * prompt is not sent: the server asked for a completion of its own. Lives no longer than the call (`endSlot`): a
 * server that keeps asking after its call ended (the burst stopped it) spends nothing of a burst that may have
 * landed. Fails with `SampleRefused`: `gate` (a check fired, named in `check`; no model call was made), `provider`
 * (the chain failed) or `ended`; the first two are also the trajectory's `errors` (`sampling.gate`,
 * `sampling.provider`), while a sample stopped by its call's end is told by `ToolCallRecord.samples` alone (the
 * burst may be landing by then). The caller bounds the wait.
 */
export const sample = (ctx: Burst.Context, burst: Burst.Burst, slot: SampleSlot): Sampler => (request) => {
  const stopped = new SampleRefused({
    reason: "ended",
    message: `Corral stopped the sample of MCP server "${request.server}": the tool call it served has ended`
  })
  const served = attempt(ctx, burst, sampleRequest(request), slot).pipe(
    Effect.map(({ provider, reply }): SampleReply => {
      const cut = cutAtStop(reply.text, request.stopSequences)
      return {
        text: cut ?? reply.text,
        model: reply.model === "" ? provider.model : reply.model,
        stopReason: cut === undefined ? stopReasonOf(reply.finishReason) : "stopSequence"
      }
    }),
    Effect.catchAll((failure) => {
      const refused = "check" in failure
        ? new SampleRefused({
          reason: "gate",
          check: failure.check,
          message: `Corral did not sample for MCP server "${request.server}": ${failure.notice} (the ` +
            `${failure.check} check of the session's exit policy); no model call was made`
        })
        : new SampleRefused({
          reason: "provider",
          message: `the session's model did not answer MCP server "${request.server}": ${
            failure._tag === "ProviderError" ? `${failure.kind}: ${failure.message}` : failure.message
          }`
        })
      burst.errors.push({ code: `sampling.${refused.reason}`, message: refused.message })
      return Effect.fail(refused)
    })
  )
  return Effect.suspend(() =>
    slot.ended
      ? Effect.fail(stopped)
      // Interrupted mid-attempt when the call ends: the chain's attempt is stopped like any interrupted call.
      : Effect.raceFirst(served, Effect.zipRight(Deferred.await(overOf(slot)), Effect.fail(stopped)))
  )
}

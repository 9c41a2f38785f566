/**
 * replayWorld — the world a stored burst is replayed in (Replay): providers that answer attempt by attempt from the
 * record and an executor that answers call by call (asking again, at their recorded times, the samples its tool
 * servers asked for), both on a TestClock that `drive` moves to the next pending wake-up whenever the replay is idle.
 * A request the record does not match is reported as a divergence and never answered.
 */
import { Chunk, Clock, Effect, Fiber, Option, TestClock } from "effect"
import { ProviderError } from "../../domain/Errors.js"
import type { ModelAttempt, ToolCallRecord, Trajectory } from "../../domain/Trajectory.js"
import type { ModelProvider } from "../../model/ModelProvider.js"
import type { SampleRequest, ToolDef, ToolExecutor, ToolOutcome } from "../../tools/ToolExecutor.js"
import type { Divergence } from "../Replay.js"
import * as ToolCall from "../ToolCall.js"
import { firstDifference } from "./replayDiff.js"

/** What the record says, as the replay consumes it. */
export interface Feed {
  readonly attempts: ReadonlyArray<ModelAttempt>
  next: number
  /** The recorded calls by call id, in dispatch order (a model may reuse an id within a burst). */
  readonly calls: ReadonlyMap<string, Array<ToolCallRecord>>
  /** The recorded samples (the first attempt of each) by the call they served, in order, still to ask. */
  readonly samples: Map<string, Array<ModelAttempt>>
  /** The record has no more to give a burst that crashed: the replay stops there. */
  ended: boolean
  divergence: Divergence | undefined
  /** Bumped by every replayed request, so the driver knows the burst is still moving. */
  progress: number
}

/** Whether the recorded burst crashed: it is verified up to where its record ends. */
export const crashedBurst = (t: Trajectory) => t.exitReason === "crashed"

/** Waits for the replayed time `until` (recorded), plus `then` ms, on the TestClock. */
export const sleepUntil = (until: number, then: number) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sleep(Math.max(0, until - now) + then))

/** The burst's route as providers that answer attempt by attempt from the record. */
export const replayProviders = (t: Trajectory, feed: Feed, diverge: (d: Omit<Divergence, "runId">) => void) =>
  (t.replay?.route ?? []).map((entry): ModelProvider => ({
    name: entry.name,
    model: entry.model,
    maxAttempts: entry.maxAttempts,
    timeoutMs: entry.timeoutMs,
    ...(entry.pricing === undefined ? {} : { pricing: entry.pricing }),
    ...(entry.maxOutputTokens === undefined ? {} : { maxOutputTokens: entry.maxOutputTokens }),
    complete: (request) =>
      Effect.suspend(() => {
        feed.progress += 1
        const i = feed.next
        // A sample asked again answers only from its own attempts: one past them was in flight when its tool call
        // ended (the recording kept no attempt of it), so it waits for the same end here, taking no record.
        const asked = sampleAsked(request.system)
        if (asked !== undefined) {
          const next = feed.attempts[i]?.sampled
          if (next?.callId !== asked.callId || next.n !== asked.n) return Effect.never
        }
        const rec = feed.attempts[i]
        if (rec === undefined) {
          // Past the record: in flight when the burst ended (a timer or a cancel ends it), or where a crash struck.
          if (crashedBurst(t)) feed.ended = true
          return Effect.never
        }
        feed.next += 1
        const request_ = { messages: request.messages.length, tools: request.tools.length }
        if (rec.provider !== entry.name) {
          diverge({ path: `modelCalls[${i}].provider`, recorded: rec.provider, replayed: entry.name })
          return Effect.never
        }
        const d = firstDifference(rec.request, request_, `modelCalls[${i}].request`, 0)
        if (Option.isSome(d)) {
          diverge(d.value)
          return Effect.never
        }
        const error = rec.error
        // A timeout the chain itself raised: let its own timer fire on the replayed clock.
        if (error?.kind === "timeout" && rec.durationMs >= entry.timeoutMs) return Effect.never
        return Effect.zipRight(
          sleepUntil(rec.startedAt, rec.durationMs),
          rec.reply !== undefined
            ? Effect.succeed(rec.reply)
            : Effect.fail(
              new ProviderError({
                kind: error?.kind ?? "server",
                message: error?.message ?? "",
                provider: entry.name,
                ...(error?.status === undefined ? {} : { status: error.status }),
                ...(error?.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }),
                usage: rec.usage
              })
            )
        )
      })
  }))

/** An executor that answers call by call from the record, asking again the samples its servers asked for. */
export const replayExecutor = (
  t: Trajectory,
  feed: Feed,
  diverge: (d: Omit<Divergence, "runId">) => void
): ToolExecutor["Type"] => {
  const defs: ReadonlyArray<ToolDef> = (t.replay?.tools ?? []).map((tool) => ({
    name: tool.name,
    description: "",
    parameters: { type: "object" },
    effect: tool.effect === "write" ? "write" : "read",
    source: tool.source,
    ...(tool.unavailable === undefined ? {} : { unavailable: tool.unavailable })
  }))
  return {
    list: () => Effect.succeed(defs),
    call: (name, argumentsJson, ctx) =>
      Effect.suspend((): Effect.Effect<ToolOutcome> => {
        feed.progress += 1
        const rec = feed.calls.get(ctx.callId)?.shift()
        if (rec === undefined) {
          if (crashedBurst(t)) feed.ended = true
          else diverge({ path: `toolCalls[callId ${ctx.callId}]`, recorded: undefined, replayed: name })
          return Effect.never
        }
        if (rec.name !== name || rec.arguments !== argumentsJson) {
          diverge({
            path: `toolCalls[callId ${ctx.callId}]`,
            recorded: { name: rec.name, arguments: rec.arguments },
            replayed: { name, arguments: argumentsJson }
          })
          return Effect.never
        }
        // The samples its server asked for during the call, asked again at their recorded times: they pass the
        // replayed gate and counters, and the replayed providers answer them from the record. One the call's end
        // stopped before any attempt was recorded passes the gate again and waits, unanswered, for the same end.
        const queued = feed.samples.get(ctx.callId) ?? []
        const mine = queued.splice(0, rec.samples ?? 0)
        const unanswered = (rec.samples ?? 0) - mine.length
        const ask = (request: SampleRequest) =>
          ctx.sample === undefined
            ? Effect.sync(() =>
              diverge({ path: `toolCalls[callId ${ctx.callId}].samples`, recorded: rec.samples, replayed: 0 })
            )
            : Effect.ignore(ctx.sample(request))
        const samples = Effect.zipRight(
          Effect.forEach(
            mine,
            (first) =>
              Effect.zipRight(
                sleepUntil(first.startedAt, 0),
                ask(replayedSample(first.sampled!, first.request.messages))
              ),
            { discard: true }
          ),
          // No attempt of these was recorded: none of the record answers them.
          Effect.forEach(
            Array.from({ length: unanswered }),
            () => ask(replayedSample({ callId: ctx.callId, n: -1 }, 0)),
            { concurrency: "unbounded", discard: true }
          )
        )
        // Alongside the call, which ends at its recorded end whatever they do: a sample still running then is
        // stopped by it, as in the recording (where the calling tool's deadline, or its end, stopped it).
        const alongside = Effect.fork(samples)
        // Stopped by the end of the burst (a timer or a cancel): it ends the same way here.
        if (rec.failure === "interrupted" && rec.result.startsWith(ToolCall.interruptedText)) {
          return Effect.zipRight(alongside, Effect.never)
        }
        return Effect.zipRight(
          alongside,
          Effect.as(sleepUntil(rec.startedAt ?? 0, rec.durationMs), {
            content: rec.output ?? rec.result,
            isError: rec.isError,
            ...(rec.attachments === undefined ? {} : { attachments: rec.attachments }),
            ...(rec.failure === undefined ? {} : { failure: rec.failure })
          })
        )
      })
  }
}

/**
 * A sample asked again: only the shape the record keeps (the number of messages) — the recorded replies answer it,
 * and what the tool made of the answer is in the recorded result.
 */
const replayedSample = (sampled: { readonly callId: string; readonly n: number }, messages: number): SampleRequest => ({
  server: "(replay)",
  // Which sample it is, for the replayed providers: the loop's requests carry the agent's prompt, never this.
  system: `${samplePrefix}${JSON.stringify(sampled)}`,
  messages: Array.from({ length: messages }, () => ({ role: "user" as const, text: "" })),
  maxTokens: 1
})

const samplePrefix = "\u0000corral/replay sample "

/** The recorded sample a replayed request asks again (`replayedSample`), if it is one. */
const sampleAsked = (system: string): { readonly callId: string; readonly n: number } | undefined =>
  system.startsWith(samplePrefix) ? JSON.parse(system.slice(samplePrefix.length)) : undefined

/** The first attempt of each recorded sample, by the call it served, in order. */
export const samplesOf = (attempts: ReadonlyArray<ModelAttempt>) => {
  const samples = new Map<string, Array<ModelAttempt>>()
  const seen = new Set<string>()
  for (const attempt of attempts) {
    if (attempt.sampled === undefined) continue
    const key = `${attempt.sampled.callId} ${attempt.sampled.n}`
    if (seen.has(key)) continue
    seen.add(key)
    const list = samples.get(attempt.sampled.callId)
    if (list === undefined) samples.set(attempt.sampled.callId, [attempt])
    else list.push(attempt)
  }
  return samples
}

/** A macrotask: lets every fiber woken in the replay's world run before the driver looks again. */
const macrotask = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 0)))

/** Waits until the replay stops moving: the same progress and the same pending sleeps twice in a row. */
const settle = (feed: Feed) =>
  Effect.gen(function*() {
    let before = ""
    for (let i = 0; i < 200; i++) {
      yield* macrotask
      const now = `${feed.progress}|${Chunk.join(Chunk.map(yield* TestClock.sleeps(), String), ",")}`
      if (now === before) return
      before = now
    }
  })

/**
 * Runs `fiber` to its end, moving the TestClock to the next pending wake-up whenever the replay is idle. Stops early
 * on a divergence or when a crashed burst's record is spent.
 */
export const drive = <A, E>(
  fiber: Fiber.RuntimeFiber<A, E>,
  feed: Feed,
  diverge: (d: Omit<Divergence, "runId">) => void
) =>
  Effect.gen(function*() {
    for (let step = 0; step < 100_000; step++) {
      yield* settle(feed)
      if (Option.isSome(yield* Fiber.poll(fiber))) return
      if (feed.divergence !== undefined || feed.ended) return yield* Fiber.interrupt(fiber)
      const sleeps = Chunk.toReadonlyArray(yield* TestClock.sleeps())
      if (sleeps.length === 0) {
        diverge({ path: "progress", recorded: "the burst's end", replayed: "a burst waiting on nothing" })
        return yield* Fiber.interrupt(fiber)
      }
      yield* TestClock.setTime(Math.min(...sleeps))
    }
    diverge({ path: "progress", recorded: "the burst's end", replayed: "still running after 100,000 clock steps" })
    yield* Fiber.interrupt(fiber)
  })

/** The calls the loop dispatched (a record with a start time), by call id, in order. */
export const byCallId = (records: ReadonlyArray<ToolCallRecord>) => {
  const calls = new Map<string, Array<ToolCallRecord>>()
  for (const record of records) {
    if (record.origin !== "model" || record.startedAt === undefined) continue
    const list = calls.get(record.callId)
    if (list === undefined) calls.set(record.callId, [record])
    else list.push(record)
  }
  return calls
}

/**
 * Reasoning parts in the loop (DESIGN §11): stored with the assistant turn before any tool runs, handed back to the
 * provider in later requests of the session, left out (and said so, once) for a provider that did not make them,
 * counted as reasoning tokens, and compared verbatim by replay.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { TurnEntry } from "../../src/domain/Message.js"
import * as Reasoning from "../../src/model/Reasoning.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Replay from "../../src/session/Replay.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Tools from "../support/tools.js"

const spec = Harness.agent({ tools: Tools.names })

const thinking = (text: string) => ({ type: "thinking" as const, thinking: text, signature: `sig:${text}` })
const echo = (q: string) => Scripted.toolCalls([{ name: "echo", arguments: { q } }])

const run = (providers: ReadonlyArray<Scripted.Scripted>) =>
  Harness.drive(Harness.runBurst({ spec }).pipe(Effect.provide(Harness.layer({ providers, tools: Tools.all }))))

const assistants = (turns: ReadonlyArray<{ readonly entry: TurnEntry }>) =>
  turns.flatMap((turn) => turn.entry.kind === "assistant" ? [turn.entry] : [])

describe("Reasoning parts", () => {
  it.effect("are stored with the assistant turn and reach the provider again with the tool results", () =>
    Effect.gen(function*() {
      const claude = Scripted.make({
        name: "claude",
        script: [
          Scripted.withReasoning(echo("a"), [thinking("look at the logs first")], 40),
          Scripted.withReasoning(Scripted.text("done"), [{ type: "redacted_thinking", data: "opaque" }], 7)
        ]
      })
      const landed = yield* run([claude])
      expect(landed.reason).toBe("completed")
      const [first, second] = assistants(landed.turns)
      expect(first?.reasoning).toEqual([{ ...thinking("look at the logs first"), provider: "claude" }])
      expect(second?.reasoning).toEqual([{ type: "redacted_thinking", data: "opaque", provider: "claude" }])
      // The second request carries the first turn with its reasoning, unchanged, before its results.
      const sent = claude.requests[1]!.messages
      const open = Reasoning.openToolCycle(sent)
      expect(open?.reasoning).toEqual(first?.reasoning)
      expect(Reasoning.ownParts(open!, "claude")).toEqual(first?.reasoning)
      // Reasoning tokens are output tokens, counted apart.
      expect(landed.trajectory.usage.reasoningTokens).toBe(47)
      expect(landed.trajectory.usage.outputTokens).toBeGreaterThanOrEqual(47 + 5 + 5)
      // The turn went to the store before the tool ran: the results come right after it, in the next turn.
      const kinds = landed.turns.map((turn) => turn.entry.kind)
      expect(kinds).toEqual(["user", "assistant", "tool_results", "assistant"])
    }))

  it.effect("after a failover, the other provider's parts are not for the new one: one rail decision says so", () =>
    Effect.gen(function*() {
      const claude = Scripted.make({
        name: "claude",
        maxAttempts: 1,
        script: [Scripted.withReasoning(echo("a"), [thinking("plan")]), Scripted.fault("auth")]
      })
      const gpt = Scripted.make({ name: "gpt", script: [echo("b"), Scripted.text("done")] })
      const landed = yield* run([claude, gpt])
      expect(landed.reason).toBe("completed")
      const dropped = (landed.trajectory.decisions ?? []).filter((d) => d._tag === "reasoning_dropped")
      // gpt answered three calls of the burst (two turns and the finalize), all without claude's part: said once.
      expect(gpt.requests.length).toBe(3)
      expect(dropped).toEqual([expect.objectContaining({ provider: "gpt", parts: 1 })])
      expect(Reasoning.foreignParts(gpt.requests[0]!.messages, "gpt")).toBe(1)
      // The part stays in the transcript: it is claude's record, for a replay or a failback.
      expect(assistants(landed.turns)[0]?.reasoning?.[0]).toMatchObject({ provider: "claude", thinking: "plan" })
    }))

  it.effect("replay verifies them verbatim, and a changed signature diverges at its path", () =>
    Effect.gen(function*() {
      const claude = Scripted.make({
        name: "claude",
        script: [Scripted.withReasoning(echo("a"), [thinking("check")]), Scripted.text("done")]
      })
      const landed = yield* run([claude])
      const verified = yield* Replay.verifyBurst({
        spec,
        session: landed.session,
        turns: landed.turns,
        trajectory: landed.trajectory,
        last: true
      })
      expect(verified).toMatchObject({ _tag: "Verified", exitReason: "completed" })

      // The stored turn says one thing, the recorded reply another: the replay's turn differs from the stored one.
      const turns = landed.turns.map((turn) =>
        turn.entry.kind === "assistant" && turn.entry.reasoning !== undefined
          ? {
            ...turn,
            entry: { ...turn.entry, reasoning: [{ ...thinking("check"), signature: "forged", provider: "claude" }] }
          }
          : turn
      )
      const diverged = yield* Replay.verifyBurst({
        spec,
        session: landed.session,
        turns,
        trajectory: landed.trajectory,
        last: true
      })
      expect(diverged._tag).toBe("Diverged")
      if (diverged._tag !== "Diverged") return
      expect(diverged.divergence.path).toMatch(/^turns\[\d+\]\.reasoning\[0\]\.signature$/)
    }))
})

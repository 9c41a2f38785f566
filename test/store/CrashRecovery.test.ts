/**
 * Crash recovery (issue 4, "Crash test"): nothing acknowledged is lost when the process dies mid-burst, and every
 * session resumes.
 *
 * How: a real child process (test/support/crash-child.ts) runs 20 sessions over the SQL store — the embedded PGlite
 * on disk in a temp data dir, and Postgres (a fresh database) when `CORRAL_TEST_DATABASE_URL` is set — with a
 * stateless model and a tool that takes 20–50 ms of real time (one call of session 00 hangs, so at least one call is
 * surely in flight at the kill). The child prints an ACK for every turn event (a turn is published only after it is
 * persisted). Once it has acknowledged ≥ 50 turns, that hung call's among them, the test SIGKILLs it, then restarts
 * Corral on the same store in this process and checks:
 * - every ACKed (session, seq, kind) is stored exactly once, and every transcript numbers 1..n without a gap;
 * - sessions whose burst was in flight come back `interrupted` (at least one did: the kill landed mid-burst);
 * - a turn whose calls were in flight gets an `unknown_outcome` result for each call, which is never re-run;
 * - every session continues (`continue`) to a landed report, and the pairing invariant holds on every transcript.
 * No sleeps: the test waits on the child's stdout lines, each wait bounded.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import type { Scope } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import type { Turn, TurnEntry } from "../../src/domain/Message.js"
import * as CrashChild from "../support/crash-child.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "./PostgresFixture.js"

const childPath = fileURLToPath(new URL("../support/crash-child.ts", import.meta.url))
const repoRoot = fileURLToPath(new URL("../..", import.meta.url))

/** ACKs to collect before the kill: well into the burst (20 sessions × 10 turns = 200 in all). */
const ackTarget = 50
/** The ACK of the assistant turn whose first call hangs (see crash-child's `slow`): in flight at the kill. */
const hungAck = `ACK ${CrashChild.sessionId(0)} ${CrashChild.hangSeq} assistant`

class ChildFailed extends Schema.TaggedError<ChildFailed>()("ChildFailed", { message: Schema.String }) {}

/** A running child and its stdout lines so far. */
interface Child {
  readonly lines: ReadonlyArray<string>
  /** Waits until `done(lines)` holds; fails if the child exits first or `seconds` pass. */
  readonly waitFor: (what: string, done: (lines: ReadonlyArray<string>) => boolean, seconds: number) => Effect.Effect<
    void,
    ChildFailed
  >
  /** SIGKILL, then wait for the process to be gone. */
  readonly kill: Effect.Effect<void>
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

/** Spawns the child in `mode` on `target`; killed (SIGKILL) when the scope closes if still alive. */
const spawnChild = (mode: "run" | "resume", target: string): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, ["--import", "tsx", childPath, mode, target], {
          cwd: repoRoot,
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) =>
        Effect.async<void>((resume) => {
          if (exited(child)) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGKILL")
        })
    )
    const lines: Array<string> = []
    let stderr = ""
    const listeners = new Set<() => void>()
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    createInterface({ input: child.stdout! }).on("line", (line) => {
      lines.push(line)
      for (const listener of [...listeners]) listener()
    })
    child.on("exit", () => {
      for (const listener of [...listeners]) listener()
    })

    const waitFor: Child["waitFor"] = (what, done, seconds) =>
      Effect.async<void, ChildFailed>((resume) => {
        const check = () => {
          if (done(lines)) {
            listeners.delete(check)
            resume(Effect.void)
          } else if (exited(child)) {
            listeners.delete(check)
            resume(
              Effect.fail(
                new ChildFailed({
                  message: `the child exited (${child.exitCode ?? child.signalCode}) before ${what}; ` +
                    `${lines.length} lines; stderr:\n${stderr}`
                })
              )
            )
          }
        }
        listeners.add(check)
        check()
        return Effect.sync(() => listeners.delete(check))
      }).pipe(
        Effect.timeoutFail({
          duration: `${seconds} seconds`,
          onTimeout: () =>
            new ChildFailed({ message: `no ${what} within ${seconds} s; ${lines.length} lines; stderr:\n${stderr}` })
        })
      )

    const kill = Effect.async<void>((resume) => {
      if (exited(child)) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.kill("SIGKILL")
    })
    return { lines, waitFor, kill }
  })

const acks = (lines: ReadonlyArray<string>) =>
  lines.flatMap((line) => {
    const [tag, sessionId, seq, kind] = line.split(" ")
    return tag === "ACK" && sessionId !== undefined && seq !== undefined && kind !== undefined
      ? [{ sessionId, seq: Number(seq), kind }]
      : []
  })

/** Every assistant turn with calls is followed at once by one tool_results answering exactly those calls. */
const pairingHolds = (entries: ReadonlyArray<TurnEntry>): boolean =>
  entries.every((entry, i) => {
    if (entry.kind === "tool_results") {
      const previous = entries[i - 1]
      return previous?.kind === "assistant" &&
        JSON.stringify(previous.toolCalls.map((c) => c.id)) === JSON.stringify(entry.results.map((r) => r.callId))
    }
    if (entry.kind === "assistant" && entry.toolCalls.length > 0) return entries[i + 1]?.kind === "tool_results"
    return true
  })

const seqs = (turns: ReadonlyArray<Turn>) => turns.map((t) => t.seq)
const oneToN = (n: number) => Array.from({ length: n }, (_, i) => i + 1)

/** Kills a child mid-burst on `target`, restarts in-process on the same store, and checks the recovery. */
const crashAndRecover = (target: string) =>
  Effect.gen(function*() {
    const child = yield* spawnChild("run", target)
    yield* child.waitFor(
      `STARTED, ${ackTarget} ACKs and "${hungAck}"`,
      (lines) => lines.includes("STARTED") && lines.includes(hungAck) && acks(lines).length >= ackTarget,
      60
    )
    yield* child.kill
    expect(child.lines).not.toContain("DONE")
    const acked = acks(child.lines)

    const summary = yield* Effect.provide(CrashChild.resume, CrashChild.layer(target))
    const byId = new Map(summary.sessions.map((s) => [s.id, s]))
    expect([...byId.keys()].sort()).toEqual(
      Array.from({ length: CrashChild.SESSIONS }, (_, i) => CrashChild.sessionId(i))
    )

    // Every acknowledged turn is stored exactly once, with the kind that was acknowledged.
    for (const ack of acked) {
      const stored = (byId.get(ack.sessionId)?.before ?? []).filter((t) => t.seq === ack.seq)
      expect(stored.map((t) => t.entry.kind), `${ack.sessionId} seq ${ack.seq}`).toEqual([ack.kind])
    }

    let interrupted = 0
    let repaired = 0
    for (const s of summary.sessions) {
      // Gap-free numbering before and after the restart; the restart only appends.
      expect(seqs(s.before), s.id).toEqual(oneToN(s.before.length))
      expect(seqs(s.after), s.id).toEqual(oneToN(s.after.length))
      expect(s.after.slice(0, s.before.length)).toEqual(s.before)

      const last = s.before.at(-1)?.entry
      if (s.statusOnRestart === "interrupted") interrupted++
      else if (s.statusOnRestart !== "running") {
        // `running`: its burst never started before the kill, and recovery is running its accepted prompt now.
        // Otherwise not interrupted: its burst had landed (final answer stored) or never started.
        expect(last === undefined || (last.kind === "assistant" && last.toolCalls.length === 0), s.id).toBe(true)
      }

      // Calls in flight at the kill: closed as unknown_outcome, one result per call, never run again.
      if (s.statusOnRestart !== "running" && last?.kind === "assistant" && last.toolCalls.length > 0) {
        repaired++
        expect(s.statusOnRestart, s.id).toBe("interrupted")
        const repair = s.after[s.before.length]?.entry
        expect(repair?.kind, s.id).toBe("tool_results")
        if (repair?.kind === "tool_results") {
          expect(repair.results.map((r) => [r.callId, r.status])).toEqual(
            last.toolCalls.map((c) => [c.id, "unknown_outcome"])
          )
        }
      }
      const entries = s.after.map((t) => t.entry)
      const calls = entries.flatMap((e) => e.kind === "assistant" ? e.toolCalls.map((c) => c.id) : [])
      expect(new Set(calls).size, `${s.id}: a call id was reused`).toBe(calls.length)
      expect(pairingHolds(entries), `${s.id}: pairing`).toBe(true)

      // Every session continues to a landed report.
      expect(s.exitReason, s.id).toBeDefined()
      expect(s.hasReport, s.id).toBe(true)
      expect(s.statusAfter, s.id).toBe("idle")
    }
    // The kill landed mid-burst: at least the hung call was in flight (others may have been too).
    expect(interrupted).toBeGreaterThan(0)
    expect(repaired).toBeGreaterThan(0)
    const hung = byId.get(CrashChild.sessionId(0))
    expect(hung?.before.length).toBe(CrashChild.hangSeq)
    expect(hung?.after[CrashChild.hangSeq]?.entry).toMatchObject({
      kind: "tool_results",
      results: [{ status: "unknown_outcome" }, { status: "unknown_outcome" }]
    })
  })

describe("crash recovery", () => {
  it.live(
    "embedded PGlite on disk: SIGKILL mid-burst loses no acknowledged turn; every session lands",
    () =>
      Effect.gen(function*() {
        const dir = yield* Effect.acquireRelease(
          Effect.promise(() => mkdtemp(join(tmpdir(), "corral-crash-"))),
          (path) => Effect.promise(() => rm(path, { recursive: true, force: true }))
        )
        yield* crashAndRecover(dir)
      }).pipe(Effect.scoped),
    90_000
  )

  describe.skipIf(testDatabaseUrl === undefined)(
    testDatabaseUrl === undefined ? `postgres ${skipReason}` : "postgres",
    () => {
      it.live(
        "Postgres: SIGKILL mid-burst loses no acknowledged turn; every session lands",
        () =>
          Effect.gen(function*() {
            const context = yield* Layer.build(freshDatabase(testDatabaseUrl ?? ""))
            const sql = Context.get(context, SqlClient.SqlClient)
            const [row] = yield* sql<{ readonly name: string }>`SELECT current_database() AS name`
            const url = new URL(testDatabaseUrl ?? "")
            url.pathname = `/${row?.name ?? ""}`
            yield* crashAndRecover(url.toString())
          }).pipe(Effect.scoped),
        90_000
      )
    }
  )
})

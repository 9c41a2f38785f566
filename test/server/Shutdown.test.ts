/**
 * Graceful shutdown under load, as an operator sees it: `corral serve` (a child process, embedded PGlite store) with
 * 50 sessions mid-burst gets SIGTERM. It must exit 0 within its bound, and the database it leaves behind must hold
 * every turn a client was told about, with every burst landed (cancelled or completed) and its report saved.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Config from "../../src/config/Config.js"
import type { Turn } from "../../src/domain/Message.js"
import { localPrincipal } from "../../src/server/Authentication.js"
import * as Wiring from "../../src/server/Wiring.js"
import * as Migrations from "../../src/store/Migrations.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import type { SseEvent } from "../support/ServerHarness.js"
import { corral, eventually, raw, readSse } from "../support/ServerHarness.js"

const SESSIONS = 50

it.live(
  "SIGTERM with 50 running sessions: exit 0, every acknowledged turn persisted, every burst landed",
  () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "corral-shutdown-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const child = corral(["serve", "--port", "0"], {
        CORRAL_DATA_DIR: join(dir, "data"),
        CORRAL_DEMO_DELAY_MS: "1500",
        CORRAL_SHUTDOWN_TIMEOUT_MS: "10000"
      }, dir)
      yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
      const url = yield* eventually(
        "the server to listen",
        Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
        "90 seconds"
      )

      // The embedded database is migrated at start: the readiness probe says so.
      const ready = yield* raw(`${url}/readyz`)
      expect(ready.status).toBe(200)
      const migrations = Object.keys(Migrations.all).length
      expect(JSON.parse(ready.text).checks).toEqual({
        database: "reachable",
        migrations: `${migrations}/${migrations} applied`
      })

      const ids = yield* Effect.forEach(
        Array.from({ length: SESSIONS }, (_, i) => i),
        (i) =>
          Effect.map(
            raw(`${url}/v1/sessions`, {
              method: "POST",
              body: JSON.stringify({ agentId: "demo", scope: `load:${i}`, prompt: `Why is service ${i} failing?` }),
              headers: { "content-type": "application/json" }
            }),
            (response) => {
              expect(response.status).toBe(202)
              return JSON.parse(response.text).sessionId as string
            }
          ),
        { concurrency: 10 }
      )

      // Every turn a client is told about over SSE is "acknowledged": it must survive the shutdown.
      const acknowledged = new Map<string, Array<SseEvent>>()
      const followers = yield* Effect.forEach(ids, (id) =>
        Effect.fork(
          readSse(`${url}/v1/sessions/${id}/events`, (seen) => {
            acknowledged.set(id, seen.filter((e) => e.event === "turn" || e.event === "notice"))
            return false
          }, { timeout: "120 seconds" })
        ))
      yield* eventually(
        "every session to be mid-burst with turns acknowledged",
        Effect.sync(() => ids.every((id) => (acknowledged.get(id)?.length ?? 0) >= 2) ? true : undefined),
        "60 seconds"
      )

      const running = JSON.parse((yield* raw(`${url}/v1/sessions?status=running&limit=100`)).text).sessions.length
      expect(running, "sessions mid-burst when SIGTERM is sent").toBeGreaterThan(0)
      child.process.kill("SIGTERM")
      const code = yield* Effect.promise(() => child.exited).pipe(
        Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error("serve did not exit within 30 s") })
      )
      expect(code, child.stderr()).toBe(0)
      const streams = yield* Effect.forEach(followers, Fiber.join)
      streams.forEach((events, i) => acknowledged.set(ids[i]!, events.filter((e) => e.event === "turn")))
      expect(child.stdout() + child.stderr()).toContain("shutting down")

      // Reopen the database the server left behind.
      const settings: Config.Settings = {
        ...Config.defaults,
        database: { _tag: "Embedded", dataDir: join(dir, "data") }
      }
      const outcomes = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        return yield* Effect.forEach(ids, (id) =>
          Effect.gen(function*() {
            const session = Option.getOrThrow(yield* store.getSession(localPrincipal.orgId, id))
            const turns = yield* store.turns(localPrincipal.orgId, id)
            return { id, session, turns }
          }))
      }).pipe(Effect.provide(Wiring.store(settings)))

      let cancelled = 0
      for (const { id, session, turns } of outcomes) {
        const stored = new Map<number, Turn>(turns.map((t) => [t.seq, t]))
        for (const event of acknowledged.get(id) ?? []) {
          const turn = (event.data as { turn: Turn }).turn
          expect(stored.get(turn.seq)?.entry, `session ${id} turn ${turn.seq}`).toEqual(turn.entry)
        }
        expect(turns.map((t) => t.seq)).toEqual(turns.map((_, i) => i + 1))
        expect(session.state.status).not.toBe("running")
        expect(["cancelled", "completed"]).toContain(session.state.lastExitReason)
        expect(session.state.report?.exitReason).toBe(session.state.lastExitReason)
        if (session.state.lastExitReason === "cancelled") cancelled++
      }
      // The bursts were mid-flight: most of them had to be cancelled, not waited for.
      expect(cancelled).toBeGreaterThan(0)
    }).pipe(Effect.scoped),
  { timeout: 240_000 }
)

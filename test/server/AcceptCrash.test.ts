/**
 * "Acknowledged means stored", with a real kill (issue 12): `corral serve` (a child process) answers 202 to new
 * sessions and follow-ups while its model is slow, and is SIGKILLed the moment enough 202s have arrived — with more
 * requests still in flight. A second `corral serve` on the same store must then hold every acknowledged prompt and
 * follow-up exactly once as a user turn, and run every one that never ran: no acknowledged session is left without
 * a landing or a visible `interrupted` state. On the embedded default always, and on Postgres when
 * CORRAL_TEST_DATABASE_URL is set. Wall time only because real processes are the subject; every wait is bounded.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Turn } from "../../src/domain/Message.js"
import * as Database from "../../src/store/Database.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { corral, eventually, raw } from "../support/ServerHarness.js"

const SESSIONS = 24
/** 202s to collect before the kill: the rest are in flight (or not yet sent) when it lands. */
const KILL_AFTER = 16

interface Acked {
  readonly sessionId: string
  readonly prompt: string
  readonly followUp?: string
}

const post = (url: string, path: string, body: unknown) =>
  raw(`${url}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" }
  }).pipe(
    Effect.map(Option.some),
    // The kill cuts requests in flight: those were never acknowledged.
    Effect.catchAllDefect(() => Effect.succeedNone)
  )

const listen = (child: ReturnType<typeof corral>) =>
  eventually(
    "the server to listen",
    Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
    "90 seconds"
  )

/** Serves on `env`'s store until the scope closes (SIGKILL then). */
const serve = (dir: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const child = corral(["serve", "--port", "0"], env, dir)
    yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
    return { child, url: yield* listen(child) }
  })

const scenario = (storeEnv: Record<string, string>) =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "corral-accept-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))

    // The first process: every model call takes a minute, so no burst gets far.
    const acked: Array<Acked> = []
    yield* Effect.scoped(Effect.gen(function*() {
      const { child, url } = yield* serve(dir, { ...storeEnv, CORRAL_DEMO_DELAY_MS: "60000" })
      let kill: (() => void) | undefined
      const killed = new Promise<void>((resolve) => (kill = resolve))
      const ack = (entry: Acked) => {
        acked.push(entry)
        if (acked.length === KILL_AFTER) {
          // SIGKILL in the same tick the 202 arrived: nothing gets a chance to catch up.
          child.process.kill("SIGKILL")
          kill?.()
        }
      }
      yield* Effect.forEach(Array.from({ length: SESSIONS }, (_, i) => i), (i) =>
        Effect.gen(function*() {
          const prompt = `Why is service ${i} failing? (${randomUUID()})`
          const started = yield* post(url, "/v1/sessions", { agentId: "demo", scope: `svc:${i}`, prompt })
          if (started._tag === "None" || started.value.status !== 202) return
          const sessionId = JSON.parse(started.value.text).sessionId as string
          // Every other session gets a follow-up while its first burst is in flight (it queues behind it).
          if (i % 2 === 1 && acked.length < KILL_AFTER - 1) {
            const followUp = `And its database? (${randomUUID()})`
            const sent = yield* post(url, `/v1/sessions/${sessionId}/messages`, { text: followUp })
            if (sent._tag === "Some" && sent.value.status === 202) return ack({ sessionId, prompt, followUp })
          }
          ack({ sessionId, prompt })
        }), { concurrency: 6, discard: true }).pipe(Effect.raceFirst(Effect.promise(() => killed)))
      yield* Effect.promise(() => child.exited)
    }))
    expect(acked.length).toBeGreaterThanOrEqual(KILL_AFTER)

    // The restart: a fast model; recovery runs what was accepted and never ran.
    const { url } = yield* serve(dir, { ...storeEnv, CORRAL_DEMO_DELAY_MS: "20" })
    const outcome = (entry: Acked) =>
      Effect.gen(function*() {
        const view = JSON.parse((yield* raw(`${url}/v1/sessions/${entry.sessionId}`)).text)
        const turns = JSON.parse((yield* raw(`${url}/v1/sessions/${entry.sessionId}/turns`)).text).turns as Array<Turn>
        const users = turns.flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])
        return { view, users }
      })
    for (const entry of acked) {
      const expected = entry.followUp === undefined ? [entry.prompt] : [entry.prompt, entry.followUp]
      const settled = yield* eventually(
        `session ${entry.sessionId} to hold its acknowledged messages and settle`,
        Effect.map(outcome(entry), (o) => {
          const stored = expected.every((text) => o.users.includes(text))
          const done = o.view.status === "idle" || o.view.status === "interrupted"
          return stored && done && (o.view.status === "interrupted" || o.view.exitReason !== undefined)
            ? o
            : undefined
        }),
        "90 seconds"
      )
      // Each acknowledged message exactly once, in the order it was sent.
      expect(settled.users.filter((u) => expected.includes(u))).toEqual(expected)
      // A follow-up ran after whatever the crash cut off: it landed.
      if (entry.followUp !== undefined) expect(settled.view.status).toBe("idle")
    }
  }).pipe(Effect.scoped)

describe("SIGKILL right after a 202", () => {
  it.live("embedded: every acknowledged prompt and follow-up is stored and runs", () => scenario({}), {
    timeout: 240_000
  })

  it.live.skipIf(testDatabaseUrl === undefined)(
    `Postgres: every acknowledged prompt and follow-up is stored and runs${
      testDatabaseUrl === undefined ? ` (${skipReason})` : ""
    }`,
    () =>
      Effect.gen(function*() {
        const admin = yield* Layer.build(Database.layerPostgres(Redacted.make(testDatabaseUrl!), { maxConnections: 1 }))
        const sql = yield* Effect.provide(SqlClient.SqlClient, admin)
        const name = `corral_accept_${randomUUID().replaceAll("-", "").slice(0, 12)}`
        yield* sql`CREATE DATABASE ${sql(name)}`
        yield* Effect.addFinalizer(() => sql`DROP DATABASE IF EXISTS ${sql(name)} WITH (FORCE)`.pipe(Effect.ignore))
        const url = new URL(testDatabaseUrl!)
        url.pathname = `/${name}`
        yield* scenario({ DATABASE_URL: url.toString() })
      }).pipe(Effect.scoped),
    { timeout: 240_000 }
  )
})

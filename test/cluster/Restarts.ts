/**
 * Rounds of real faults on a two-node cluster, and the checker run over the whole store after each (issue 46). Shared
 * by `Restarts.test.ts` (a few rounds) and `scripts/bench/restarts.ts` (the soak: as many rounds as asked), so it
 * imports nothing of vitest.
 *
 * One round: every session gets a follow-up (through either node) and a follower on the node that stays; once every
 * follow-up's burst has started, one node (the victim) is sent SIGTERM or SIGKILL mid-burst, and every session gets a
 * second follow-up through the surviving node while the victim stops (accepted during its drain, or while it is
 * dead). The victim is started again on its runner address, and the round waits until every acknowledged message has
 * run and no session is `running`. The checker then reads the store: sequence numbers 1..n, every call of every
 * assistant turn answered in the next turn (pairing), every acknowledged message exactly once and in the order sent,
 * no session `running`, and every follower saw every turn once, in order, up to the landing after its last message.
 * Figures per round: how long the stop took, how long until the survivor held every shard, and how long each message
 * accepted during the stop waited for its burst.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Fiber, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Database from "../../src/store/Database.js"
import { freePort } from "../support/Ports.js"
import { corral, raw, readSse } from "../support/ServerHarness.js"
import type { Child, SseEvent } from "../support/ServerHarness.js"

/** The shards of the session entity's group. */
const SHARDS = 300

/** What a rig is built with. */
export interface Settings {
  readonly sessions: number
  readonly lockExpirationMs: number
  readonly demoDelayMs: number
}

/** A running node. */
export interface Node {
  readonly child: Child
  readonly url: string
  readonly runnerPort: number
}

/** The two nodes, the database, and what was sent to each session so far. */
export interface Rig {
  readonly sql: SqlClient.SqlClient
  readonly nodes: [Node, Node]
  readonly start: (runnerPort?: number) => Effect.Effect<Node, never, Scope.Scope>
  readonly sessions: ReadonlyArray<string>
  readonly sent: Map<string, Array<string>>
  /** What every node printed, for a failure's report. */
  readonly logs: Array<string>
}

/** What one round measured, and what the checker found wrong (empty: the round passed). */
export interface RoundResult {
  readonly round: number
  readonly signal: "SIGTERM" | "SIGKILL"
  readonly exitCode: number | null
  readonly stopMs: number
  /** From the signal until the surviving node held every shard. */
  readonly takeoverMs: number
  /** Per message accepted while the victim stopped: from its 202 to its user turn being stored. */
  readonly waitedMs: ReadonlyArray<number>
  readonly violations: ReadonlyArray<string>
}

/** Polls `check` every 250 ms until it returns a value, at most `within` (then dies naming `what`). */
const poll = <A, E, R>(what: string, check: Effect.Effect<A | undefined, E, R>, within: Duration.DurationInput) =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(within)
    for (;;) {
      const value = yield* check
      if (value !== undefined) return value
      if (Date.now() > deadline) return yield* Effect.dieMessage(`timed out after ${Duration.format(within)}: ${what}`)
      yield* Effect.sleep("250 millis")
    }
  })

/** How many shards each runner holds (granted advisory locks per backend of this database). */
const shardHolders = (sql: SqlClient.SqlClient) =>
  sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
    WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database() GROUP BY l.pid`.pipe(
    Effect.map((rows) => rows.map((r) => r.n)),
    Effect.orElseSucceed((): Array<number> => [])
  )

/** How many shards each runner holds, by its connections' application name (cluster/Fence `applicationName`). */
const shardsByRunner = (sql: SqlClient.SqlClient) =>
  sql<{ name: string; n: number }>`SELECT a.application_name AS name, count(*)::int AS n
    FROM pg_locks l JOIN pg_database d ON d.oid = l.database JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database() GROUP BY a.application_name`.pipe(
    Effect.map((rows) => new Map(rows.map((row) => [row.name, row.n]))),
    Effect.orElseSucceed(() => new Map<string, number>())
  )

const awaitShards = (sql: SqlClient.SqlClient, runners: number, within: Duration.DurationInput) =>
  poll(
    `${runners} runner(s) to hold every shard`,
    Effect.map(shardHolders(sql), (held) =>
      held.length === runners && held.reduce((a, b) => a + b, 0) === SHARDS &&
        held.every((n) => n >= SHARDS / runners / 3)
        ? held
        : undefined),
    within
  )

const post = (url: string, body: unknown) =>
  raw(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } })

/**
 * A fresh database (dropped when the scope closes), two nodes on it holding every shard between them, and
 * `settings.sessions` sessions of the demo agent started through both and landed.
 */
export const rig = (adminUrl: string, settings: Settings): Effect.Effect<Rig, never, Scope.Scope> =>
  Effect.gen(function*() {
    const logs: Array<string> = []
    const admin = yield* Layer.build(Database.layerPostgres(Redacted.make(adminUrl), { maxConnections: 1 })).pipe(
      Effect.orDie
    )
    const adminSql = yield* Effect.provide(SqlClient.SqlClient, admin)
    const name = `corral_restarts_${randomUUID().replaceAll("-", "").slice(0, 12)}`
    yield* adminSql`CREATE DATABASE ${adminSql(name)}`.pipe(Effect.orDie)
    yield* Effect.addFinalizer(() =>
      adminSql`DROP DATABASE IF EXISTS ${adminSql(name)} WITH (FORCE)`.pipe(Effect.ignore)
    )
    const dbUrl = new URL(adminUrl)
    dbUrl.pathname = `/${name}`
    const context = yield* Layer.build(Database.layerPostgres(Redacted.make(dbUrl.toString()), { maxConnections: 2 }))
      .pipe(Effect.orDie)
    const sql = yield* Effect.provide(SqlClient.SqlClient, context)
    const dir = mkdtempSync(join(tmpdir(), "corral-restarts-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const env = {
      DATABASE_URL: dbUrl.toString(),
      CORRAL_DEMO_DELAY_MS: String(settings.demoDelayMs),
      CORRAL_CLUSTER_LOCK_EXPIRATION_MS: String(settings.lockExpirationMs),
      CORRAL_CLUSTER_HOST: "127.0.0.1"
    }
    const start = (runnerPort?: number) =>
      Effect.gen(function*() {
        const port = runnerPort ?? (yield* freePort)
        const child = corral(["serve", "--cluster", "--port", "0"], { ...env, CORRAL_CLUSTER_PORT: String(port) }, dir)
        let recorded = false
        const record = () => {
          if (recorded) return
          recorded = true
          logs.push(`runner ${port} (pid ${child.process.pid}):\n${child.stdout()}${child.stderr()}`)
        }
        void child.exited.then(record)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            child.process.kill("SIGKILL")
            record()
          })
        )
        const url = yield* poll(
          "the node to listen",
          Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
          "60 seconds"
        )
        return { child, url, runnerPort: port }
      })
    const a = yield* start()
    const b = yield* start()
    yield* awaitShards(sql, 2, "60 seconds")
    const sent = new Map<string, Array<string>>()
    const sessions = yield* Effect.forEach(
      Array.from({ length: settings.sessions }, (_, i) => i),
      (i) =>
        Effect.gen(function*() {
          const prompt = `Why is service s${i} failing? (${randomUUID()})`
          const started = yield* post(`${(i % 2 === 0 ? a : b).url}/v1/sessions`, {
            agentId: "demo",
            scope: `svc:s${i}`,
            prompt
          })
          if (started.status !== 202) {
            return yield* Effect.dieMessage(`start refused: ${started.status} ${started.text}`)
          }
          const id = JSON.parse(started.text).sessionId as string
          sent.set(id, [prompt])
          return id
        }),
      { concurrency: 4 }
    )
    yield* settled(sql, sent, "90 seconds")
    return { sql, nodes: [a, b], start, sessions, sent, logs }
  })

interface TurnRow {
  readonly session_id: string
  readonly seq: number
  readonly created_at: number
  readonly payload: {
    readonly kind: string
    readonly text?: string
    readonly toolCalls?: ReadonlyArray<{ readonly id: string }>
    readonly results?: ReadonlyArray<{ readonly callId: string }>
  }
}

const allTurns = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<TurnRow>`SELECT session_id, seq, created_at, payload FROM turns ORDER BY session_id, seq`.pipe(Effect.orDie),
    (rows) => {
      const by = new Map<string, Array<TurnRow>>()
      for (const row of rows) {
        const list = by.get(row.session_id)
        if (list === undefined) by.set(row.session_id, [row])
        else list.push(row)
      }
      return by
    }
  )

/** Every acknowledged message has its user turn and no session is `running`, read from the database. */
const settled = (
  sql: SqlClient.SqlClient,
  sent: ReadonlyMap<string, ReadonlyArray<string>>,
  within: Duration.DurationInput
) =>
  poll(
    "every acknowledged message to run and no session to be running",
    Effect.gen(function*() {
      const running = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM sessions WHERE status = 'running'`
        .pipe(Effect.orDie)
      if ((running[0]?.n ?? 0) > 0) return undefined
      const turns = yield* allTurns(sql)
      for (const [id, texts] of sent) {
        const users = new Set((turns.get(id) ?? []).flatMap((t) => t.payload.kind === "user" ? [t.payload.text] : []))
        if (!texts.every((text) => users.has(text))) return undefined
      }
      return true
    }),
    within
  )

/**
 * The checker over the whole store: what is wrong, one line each (empty when nothing is). Pairing, sequence numbers,
 * every acknowledged message exactly once in the order sent, no session `running`.
 */
export const check = (sql: SqlClient.SqlClient, sent: ReadonlyMap<string, ReadonlyArray<string>>) =>
  Effect.gen(function*() {
    const wrong: Array<string> = []
    const turns = yield* allTurns(sql)
    const running = yield* sql<{ id: string }>`SELECT id FROM sessions WHERE status = 'running'`.pipe(Effect.orDie)
    for (const row of running) wrong.push(`session ${row.id}: running with no burst to finish it`)
    for (const [id, rows] of turns) {
      rows.forEach((row, i) => {
        if (row.seq !== i + 1) wrong.push(`session ${id}: turn ${i + 1} has seq ${row.seq}`)
        const calls = row.payload.kind === "assistant" ? row.payload.toolCalls ?? [] : []
        if (calls.length === 0) return
        const next = rows[i + 1]
        if (next === undefined) {
          wrong.push(`session ${id}: assistant turn ${row.seq} ends the transcript with calls unanswered`)
        } else if (next.payload.kind !== "tool_results") {
          wrong.push(`session ${id}: assistant turn ${row.seq} with calls is followed by a ${next.payload.kind} turn`)
        } else {
          const answered = (next.payload.results ?? []).map((r) => r.callId).join(",")
          if (answered !== calls.map((c) => c.id).join(",")) {
            wrong.push(`session ${id}: turn ${next.seq} answers [${answered}], not the calls of turn ${row.seq}`)
          }
        }
      })
    }
    for (const [id, texts] of sent) {
      const users = (turns.get(id) ?? []).flatMap((t) => t.payload.kind === "user" ? [t.payload.text ?? ""] : [])
      const ours = users.filter((u) => texts.includes(u))
      if (ours.join("\n") !== texts.join("\n")) {
        wrong.push(`session ${id}: acknowledged messages ran as ${JSON.stringify(ours)}, sent ${JSON.stringify(texts)}`)
      }
    }
    return wrong
  })

/** A follower's stream until the landing after its session's user turn `last` (or `within`): what it saw. */
const follow = (url: string, last: string, within: Duration.DurationInput) =>
  readSse(url, (events) => {
    const at = events.findIndex((e) => e.event === "turn" && isUserText(e, last))
    return at >= 0 && events.slice(at).some((e) => e.event === "report")
  }, { timeout: within }).pipe(Effect.catchAllDefect(() => Effect.succeed<ReadonlyArray<SseEvent>>([])))

const isUserText = (event: SseEvent, text: string) => {
  const turn = (event.data as { turn?: { entry?: { kind?: string; text?: string } } }).turn
  return turn?.entry?.kind === "user" && turn.entry.text === text
}

/** What a follower saw that it should not have, or missed (empty: it saw every turn once, in order, and the landing). */
const followerWrong = (sessionId: string, events: ReadonlyArray<SseEvent>, last: string): Array<string> => {
  const seqs = events.filter((e) => e.event === "turn").map((e) => (e.data as { seq: number }).seq)
  const wrong: Array<string> = []
  if (seqs.join(",") !== seqs.map((_, i) => i + 1).join(",")) {
    wrong.push(`session ${sessionId}: a follower saw turns ${seqs.join(",")}`)
  }
  const at = events.findIndex((e) => e.event === "turn" && isUserText(e, last))
  if (at < 0 || !events.slice(at).some((e) => e.event === "report")) {
    wrong.push(
      `session ${sessionId}: a follower never got the landing after its last message (saw ${seqs.length} turns)`
    )
  }
  return wrong
}

/**
 * Two follow-ups per session for a round: the first sent before the fault, the second while it lasts, each unique
 * and tagged with `label`.
 */
const followUpTexts = (r: Rig, label: string, during: string) => {
  const first = new Map<string, string>()
  const second = new Map<string, string>()
  for (const id of r.sessions) {
    first.set(id, `${label}: and its database? (${randomUUID()})`)
    second.set(id, `${label}: sent while a node ${during} (${randomUUID()})`)
  }
  return { first, second }
}

/** `text` to session `id` through `node`, which must accept it (202); recorded as sent, with when it was answered. */
const accept = (r: Rig, node: Node, id: string, text: string) =>
  Effect.gen(function*() {
    const answer = yield* post(`${node.url}/v1/sessions/${id}/messages`, { text })
    if (answer.status !== 202) return yield* Effect.dieMessage(`follow-up refused: ${answer.status} ${answer.text}`)
    r.sent.get(id)!.push(text)
    return [id, text, Date.now()] as const
  })

/** Every session's follow-up of `texts`, through either node, then until each one's burst has started (mid-burst). */
const midBurst = (r: Rig, texts: ReadonlyMap<string, string>) =>
  Effect.gen(function*() {
    yield* Effect.forEach(r.sessions, (id, i) => accept(r, r.nodes[i % 2]!, id, texts.get(id)!), {
      concurrency: 4,
      discard: true
    })
    yield* poll(
      "every follow-up's burst to start",
      Effect.map(allTurns(r.sql), (turns) =>
        r.sessions.every((id) =>
            (turns.get(id) ?? []).some((t) =>
              t.payload.kind === "user" && t.payload.text === texts.get(id)
            )
          )
          ? true
          : undefined),
      "60 seconds"
    )
  })

/**
 * Once every acknowledged message has run: how long each of `accepted` waited from its 202 to its user turn, and
 * what the checker and the followers (each until the landing after `lastOf` its session) found wrong.
 */
const verdict = (
  r: Rig,
  accepted: ReadonlyArray<readonly [string, string, number]>,
  followers: ReadonlyArray<Fiber.Fiber<ReadonlyArray<SseEvent>>>,
  lastOf: (id: string) => string,
  settleWithin: Duration.DurationInput
) =>
  Effect.gen(function*() {
    yield* settled(r.sql, r.sent, settleWithin)
    const turns = yield* allTurns(r.sql)
    const waitedMs = accepted.map(([id, text, at]) => {
      const turn = (turns.get(id) ?? []).find((t) => t.payload.kind === "user" && t.payload.text === text)
      return turn === undefined ? Number.NaN : Math.round(turn.created_at - at)
    })
    const violations = [...yield* check(r.sql, r.sent)]
    for (const [i, fiber] of followers.entries()) {
      const id = r.sessions[i]!
      violations.push(...followerWrong(id, yield* Fiber.join(fiber), lastOf(id)))
    }
    return { waitedMs, violations }
  })

/**
 * One round with `victim` (0 or 1) sent `signal` mid-burst; the victim is started again before the round ends, so
 * the rig's nodes are both up after it.
 */
export const round = (
  r: Rig,
  n: number,
  victim: 0 | 1,
  signal: "SIGTERM" | "SIGKILL",
  bounds: { readonly stopWithin: Duration.DurationInput; readonly settleWithin: Duration.DurationInput }
): Effect.Effect<RoundResult, never, Scope.Scope> =>
  Effect.gen(function*() {
    const target = r.nodes[victim]
    const survivor = r.nodes[1 - victim]!
    const { first, second } = followUpTexts(r, `round ${n}`, "stops")
    const lastOf = (id: string) => second.get(id) ?? first.get(id)!
    // Followers on the node that stays, from the start of each transcript.
    const followers = yield* Effect.forEach(r.sessions, (id) =>
      Effect.fork(follow(`${survivor.url}/v1/sessions/${id}/events`, lastOf(id), bounds.settleWithin)))
    yield* midBurst(r, first)
    yield* Effect.sleep(Duration.millis(Math.floor(Math.random() * 1_200)))
    const signalledAt = Date.now()
    target.child.process.kill(signal)
    // Accepted through the survivor while the victim stops (or lies dead).
    const accepted = yield* Effect.forEach([...second], ([id, text]) =>
      accept(r, survivor, id, text), {
      concurrency: 4
    })
    const exitCode = yield* Effect.promise(() => target.child.exited).pipe(
      Effect.timeoutFail({ duration: bounds.stopWithin, onTimeout: () => "timeout" as const }),
      Effect.catchAll(() => Effect.dieMessage(`the node did not exit within ${Duration.format(bounds.stopWithin)}`))
    )
    const stopMs = Date.now() - signalledAt
    yield* poll(
      "the survivor to hold every shard",
      Effect.map(shardHolders(r.sql), (held) => held.length === 1 && held[0] === SHARDS ? true : undefined),
      bounds.settleWithin
    )
    const takeoverMs = Date.now() - signalledAt
    const again = yield* r.start(target.runnerPort)
    r.nodes[victim] = again
    yield* awaitShards(r.sql, 2, "60 seconds")
    const { violations, waitedMs } = yield* verdict(r, accepted, followers, lastOf, bounds.settleWithin)
    return { round: n, signal, exitCode, stopMs, takeoverMs, waitedMs, violations }
  })

/** What one stall measured (`stall`), and what the checker found wrong. */
export interface StallResult {
  readonly round: number
  readonly stallMs: number
  /** Whether the other node took all the stalled node's shards while it was stopped (its heartbeat fell silent). */
  readonly takenOver: boolean
  /** The most shards the stalled node held fewer than before the stall, from the stall until both held shards again. */
  readonly shardsMoved: number
  /** Whether the other node logged the stalled runner as silent past the heartbeat window. */
  readonly declaredLost: boolean
  /** How many log lines of the stalled node name a write its fence refused (a session it no longer owned). */
  readonly fenced: number
  /** Whether the stalled process exited after it was let go on (it should carry on, as a node). */
  readonly exited: boolean
  /** From the stall's end until both nodes held shards again. */
  readonly backMs: number
  /** Per message accepted through the other node during the stall: from its 202 to its user turn being stored. */
  readonly waitedMs: ReadonlyArray<number>
  readonly violations: ReadonlyArray<string>
}

/**
 * One stall: every session gets a follow-up; mid-burst the victim's process is stopped (SIGSTOP: a GC pause, a starved
 * CPU, a VM paused — the process is alive, its sockets open, its connections held) for `stallMs`, while every
 * session gets a second follow-up through the other node; then it is let go on (SIGCONT). Measures whether the other
 * node took its shards meanwhile (a takeover of a live node: shorter than the heartbeat window it must not happen,
 * longer it must), how soon both hold shards again, and runs the checker: a stalled node that lost its shards must
 * not write for the sessions it lost (its fence), and nothing acknowledged is lost or run twice.
 */
export const stall = (
  r: Rig,
  n: number,
  victim: 0 | 1,
  stallMs: number,
  bounds: { readonly settleWithin: Duration.DurationInput }
): Effect.Effect<StallResult, never, Scope.Scope> =>
  Effect.gen(function*() {
    const target = r.nodes[victim]
    const survivor = r.nodes[1 - victim]!
    const { first, second } = followUpTexts(r, `stall ${n}`, "is stopped")
    const followers = yield* Effect.forEach(r.sessions, (id) =>
      Effect.fork(follow(`${survivor.url}/v1/sessions/${id}/events`, second.get(id)!, bounds.settleWithin)))
    yield* midBurst(r, first)
    // What a node printed from now on (stdout and stderr, each from its own mark).
    const since = (child: Child) => {
      const out = child.stdout().length
      const err = child.stderr().length
      return () =>
        child.stdout().slice(out) + child.stderr().slice(err)
    }
    const survivorSince = since(survivor.child)
    const victimSince = since(target.child)
    const victimName = `corral-runner 127.0.0.1:${target.runnerPort}`
    const victimHeld = Effect.map(shardsByRunner(r.sql), (held) => held.get(victimName) ?? 0)
    const heldBefore = yield* victimHeld
    let heldLeast = heldBefore
    const stoppedAt = Date.now()
    target.child.process.kill("SIGSTOP")
    const accepted = yield* Effect.forEach([...second], ([id, text]) => accept(r, survivor, id, text), {
      concurrency: 4
    })
    let takenOver = false
    while (Date.now() - stoppedAt < stallMs) {
      const held = yield* shardHolders(r.sql)
      if (held.length === 1 && held[0] === SHARDS) {
        takenOver = true
      }
      yield* Effect.sleep(Duration.millis(Math.min(250, Math.max(1, stallMs - (Date.now() - stoppedAt)))))
    }
    target.child.process.kill("SIGCONT")
    const resumedAt = Date.now()
    const declaredLost = survivorSince().includes("has not written its heartbeat")
    // Let go on, the node carries on (if it exits instead, it is started again on its address: the rig stays two).
    let exited = false
    void target.child.exited.then(() => (exited = true))
    yield* poll(
      "both nodes to hold shards again",
      Effect.gen(function*() {
        if (exited && r.nodes[victim] === target) r.nodes[victim] = yield* r.start(target.runnerPort)
        const held = yield* shardHolders(r.sql)
        heldLeast = Math.min(heldLeast, yield* victimHeld)
        return held.length === 2 && held.reduce((a, b) => a + b, 0) === SHARDS &&
            held.every((k) => k >= SHARDS / 2 / 3)
          ? true
          : undefined
      }),
      "60 seconds"
    )
    const backMs = Date.now() - resumedAt
    const { violations, waitedMs } = yield* verdict(
      r,
      accepted,
      followers,
      (id) => second.get(id)!,
      bounds.settleWithin
    )
    return {
      round: n,
      stallMs,
      takenOver,
      shardsMoved: heldBefore - heldLeast,
      declaredLost,
      fenced: victimSince().split("not written by this node").length - 1,
      exited,
      backMs,
      waitedMs,
      violations
    }
  })

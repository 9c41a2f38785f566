/**
 * What the multi-process cluster tests share: a fresh Postgres database per test, `corral serve --cluster` nodes as
 * child processes on 127.0.0.1 (each with its own runner port, which a restart may reuse), the HTTP calls the tests
 * make, and the checks they repeat (who holds the shards, what a transcript says). Every wait is a bounded poll on a
 * real condition. When a test fails, what the nodes printed is the only window into the other processes: `logs`
 * collects it and `withCluster` prints it.
 */
import { SqlClient } from "@effect/sql"
import { expect } from "@effect/vitest"
import { Duration, Effect, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Turn } from "../../src/domain/Message.js"
import * as Database from "../../src/store/Database.js"
import { freePort } from "../support/Ports.js"
import { corral, eventually, raw } from "../support/ServerHarness.js"
import type { Child } from "../support/ServerHarness.js"

/** The shards of the session entity's group (the cluster's default `shardsPerGroup`). */
export const SHARDS = 300

/**
 * A brand-new database on the test server (`adminUrl`), dropped (forcibly) when the scope closes: its URL for the
 * nodes, and a small pool on it for the test's own queries.
 */
export const clusterDatabase = (adminUrl: string) =>
  Effect.gen(function*() {
    const admin = yield* Layer.build(Database.layerPostgres(Redacted.make(adminUrl), { maxConnections: 1 }))
    const adminSql = yield* Effect.provide(SqlClient.SqlClient, admin)
    const name = `corral_cluster_${randomUUID().replaceAll("-", "").slice(0, 12)}`
    yield* adminSql`CREATE DATABASE ${adminSql(name)}`
    yield* Effect.addFinalizer(() =>
      adminSql`DROP DATABASE IF EXISTS ${adminSql(name)} WITH (FORCE)`.pipe(Effect.ignore)
    )
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    const context = yield* Layer.build(Database.layerPostgres(Redacted.make(url.toString()), { maxConnections: 2 }))
    return { url: url.toString(), sql: yield* Effect.provide(SqlClient.SqlClient, context) }
  })

/** A free TCP port on 127.0.0.1 (for a runner, which needs a fixed address other nodes can dial). */
export { freePort }

/** A JSON POST; the answer whatever its status. */
export const post = (url: string, body: unknown) =>
  raw(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } })

/** A GET whose body is JSON. */
export const json = (url: string) => Effect.map(raw(url), (r) => JSON.parse(r.text))

/** A running node: its process, its HTTP base URL, its runner address. */
export interface Node {
  readonly child: Child
  readonly url: string
  readonly runnerPort: number
}

/** How `start` starts a node: on `runnerPort` (a free one otherwise), with `env` over the cluster's. */
export interface StartOptions {
  readonly runnerPort?: number
  readonly env?: Record<string, string>
}

/** What the nodes of one test printed (filled as each node's scope closes or it is stopped). */
export type Logs = Array<string>

/**
 * A temporary working directory and the nodes started in it with `env` (the same database, demo delay, lock
 * expiration), printing into `logs`: `start` spawns one (on `runnerPort`, or a free one) and waits until it
 * listens; the scope SIGKILLs whatever still runs when it closes.
 */
export const cluster = (env: Record<string, string>, logs: Logs): Effect.Effect<
  {
    readonly start: (options?: StartOptions) => Effect.Effect<Node, never, Scope.Scope>
  },
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "corral-cluster-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const start = (options: StartOptions = {}) =>
      Effect.gen(function*() {
        const runnerPort = options.runnerPort ?? (yield* freePort)
        const child = corral(["serve", "--cluster", "--port", "0"], {
          ...env,
          ...options.env,
          CORRAL_CLUSTER_HOST: "127.0.0.1",
          CORRAL_CLUSTER_PORT: String(runnerPort)
        }, dir)
        const logged = { done: false }
        const record = () => {
          if (logged.done) return
          logged.done = true
          logs.push(`runner ${runnerPort} (pid ${child.process.pid}):\n${child.stdout()}${child.stderr()}`)
        }
        void child.exited.then(record)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            child.process.kill("SIGKILL")
            record()
          })
        )
        const url = yield* eventually(
          "the node to listen",
          Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
          "60 seconds"
        ).pipe(
          Effect.raceFirst(
            Effect.flatMap(
              Effect.promise(() => child.exited),
              (code) => Effect.dieMessage(`the node exited (${code}) before listening: ${child.stderr().slice(-2000)}`)
            )
          )
        )
        return { child, url, runnerPort }
      })
    return { start }
  })

/**
 * Sends `signal` to the node and waits for its exit, at most `within` (then dies): its exit code and how long the
 * stop took.
 */
export const stop = (node: Node, signal: NodeJS.Signals, within: Duration.DurationInput = "30 seconds") =>
  Effect.gen(function*() {
    const sentAt = Date.now()
    node.child.process.kill(signal)
    const code = yield* Effect.promise(() => node.child.exited).pipe(
      Effect.timeoutFail({ duration: within, onTimeout: () => "timeout" as const }),
      Effect.catchAll(() => Effect.dieMessage(`the node did not exit within ${Duration.format(within)} of ${signal}`))
    )
    return { code, ms: Date.now() - sentAt }
  })

/**
 * How many shards each runner holds: each runner holds its shards as advisory locks on its own lock connection,
 * so this counts granted advisory locks per backend of this database (empty before the runners made the tables).
 */
export const shardHolders = (sql: SqlClient.SqlClient) =>
  sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
    WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database() GROUP BY l.pid`.pipe(
    Effect.map((rows) => rows.map((r) => r.n)),
    Effect.orElseSucceed((): Array<number> => [])
  )

/**
 * Waits until `runners` runners hold every shard between them, about evenly (each at least a third of its share):
 * then sessions go to all of them from the first message. Returns the shards each holds.
 */
export const awaitShards = (sql: SqlClient.SqlClient, runners: number, within: Duration.DurationInput) =>
  eventually(
    `${runners} runner(s) to hold the shards`,
    Effect.map(shardHolders(sql), (held) =>
      held.length === runners && held.reduce((a, b) => a + b, 0) === SHARDS &&
        held.every((n) => n >= SHARDS / runners / 3)
        ? held
        : undefined),
    within
  )

/** Whether a turn is the user turn of `text`. */
export const isUser = (turn: Turn, text: string | undefined) => turn.entry.kind === "user" && turn.entry.text === text

/** A session's transcript, read through the node at `url`. */
export const turnsOf = (url: string, sessionId: string) =>
  Effect.map(json(`${url}/v1/sessions/${sessionId}/turns`), (body) => body.turns as Array<Turn>)

/** How many session actors are live on the node at `url` (its own sessions: `corral_actors_active`). */
export const liveActors = (url: string) =>
  Effect.map(raw(`${url}/metrics`), (r) => Number(/^corral_actors_active (\d+)/m.exec(r.text)?.[1] ?? 0))

/** Starts a session of the demo agent through the node at `url`; its 202 is an acknowledged prompt. */
export const startSession = (url: string, label: string) =>
  Effect.gen(function*() {
    const prompt = `Why is service ${label} failing? (${randomUUID()})`
    const started = yield* post(`${url}/v1/sessions`, { agentId: "demo", scope: `svc:${label}`, prompt })
    expect(started.status, started.text).toBe(202)
    return { sessionId: JSON.parse(started.text).sessionId as string, prompt }
  })

/** Sends a follow-up through the node at `url`; its 202 is an acknowledged message. */
export const followUp = (url: string, sessionId: string, text: string) =>
  Effect.map(post(`${url}/v1/sessions/${sessionId}/messages`, { text }), (sent) => {
    expect(sent.status, sent.text).toBe(202)
  })

/** A session as `GET /v1/sessions/{id}` shows it (the fields these tests read). */
export interface View {
  readonly id: string
  readonly status: string
  readonly exitReason?: string
}

/** Waits until no session of `ids` is running (each landed or was taken over: `idle` or `interrupted`), read at `url`. */
export const awaitSettled = (url: string, ids: ReadonlyArray<string>, within: Duration.DurationInput) =>
  eventually(
    "every session to land or be taken over",
    Effect.map(
      Effect.forEach(ids, (id) => json(`${url}/v1/sessions/${id}`) as Effect.Effect<View>),
      (views) => views.every((v) => v.status === "idle" || v.status === "interrupted") ? views : undefined
    ),
    within
  )

/**
 * Waits until every session of `ids` completed a burst after its follow-up `last(id)` (its view read at `viewUrl`,
 * its transcript at `turnsUrl`); the views and transcripts, in the order of `ids`.
 */
export const awaitFollowUps = (
  viewUrl: string,
  turnsUrl: string,
  ids: ReadonlyArray<string>,
  last: (id: string) => string | undefined,
  within: Duration.DurationInput
) =>
  eventually(
    "every follow-up to land",
    Effect.map(
      Effect.forEach(ids, (id) =>
        Effect.zip(json(`${viewUrl}/v1/sessions/${id}`) as Effect.Effect<View>, turnsOf(turnsUrl, id))),
      (sessions) =>
        sessions.every(([view, turns]) =>
            view.status === "idle" && view.exitReason === "completed" && turns.some((t) =>
              isUser(t, last(view.id))
            )
          )
          ? sessions
          : undefined
    ),
    within
  )

/**
 * Every acknowledged message of the session ran exactly once, in the order sent (one user turn each), and the
 * transcript has no lost or repeated turn (sequence numbers 1..n).
 */
export const expectExactlyOnce = (turns: ReadonlyArray<Turn>, sent: ReadonlyArray<string>) => {
  const users = turns.flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])
  expect(users.filter((u) => sent.includes(u))).toEqual(sent)
  expect(turns.map((t) => t.seq)).toEqual(turns.map((_, i) => i + 1))
}

/** What a scenario gets from `withCluster`: the database, and a way to start a node on it. */
export interface Cluster {
  readonly sql: SqlClient.SqlClient
  readonly start: (options?: StartOptions) => Effect.Effect<Node, never, Scope.Scope>
  /** The database's URL (what the nodes get as DATABASE_URL). */
  readonly url: string
}

/**
 * Starts two nodes one after the other (the first migrates the fresh database: the store's and the cluster's
 * tables) and waits until they hold every shard between them, so sessions go to both from the first message.
 */
export const startTwo = ({ sql, start }: Cluster) =>
  Effect.gen(function*() {
    const a = yield* start()
    const b = yield* start()
    yield* awaitShards(sql, 2, "30 seconds")
    return [a, b] as const
  })

const lockFile = join(tmpdir(), "corral-test-cluster.lock")

/**
 * One multi-node scenario at a time across the test workers: two of them at once (four `corral serve` processes
 * and their Postgres sessions on two cores) starved the nodes' shard-lock refreshes ("Shard lock storage is
 * unhealthy") and turned a scenario's own sessions `interrupted` — a failure of the machine, not of Corral. A lock
 * file holds the holder's pid; one left by a process that died is taken over. Released when the scope closes. The
 * wait is bounded (`lockWaitMs`, under the scenarios' own timeouts): a holder that never lets go fails the waiting
 * scenario with its pid rather than leaving it to the test runner's timeout.
 */
const lockWaitMs = 200_000
export const exclusive: Effect.Effect<void, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(async () => {
    const giveUpAt = Date.now() + lockWaitMs
    for (;;) {
      try {
        const fd = openSync(lockFile, "wx")
        writeSync(fd, String(process.pid))
        closeSync(fd)
        return
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      }
      try {
        const holder = Number(readFileSync(lockFile, "utf8"))
        if (holder > 0) process.kill(holder, 0)
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (code === "ESRCH") rmSync(lockFile, { force: true })
        if (code === "ESRCH" || code === "ENOENT") continue
      }
      if (Date.now() > giveUpAt) {
        let holder = "gone"
        try {
          holder = readFileSync(lockFile, "utf8")
        } catch {
          // released as the bound passed: the message says so
        }
        throw new Error(`another cluster scenario (pid ${holder}) held ${lockFile} for over ${lockWaitMs / 1000} s`)
      }
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }),
  () => Effect.sync(() => rmSync(lockFile, { force: true }))
)

/**
 * Runs `body` with a fresh database and a `cluster` on it (`env` added to every node's), then closes both; when
 * anything failed, prints what the nodes said (after the scope closed, so every node's output is in).
 */
export const withCluster = <A, E>(
  adminUrl: string,
  env: Record<string, string>,
  body: (context: Cluster) => Effect.Effect<A, E, Scope.Scope>
): Effect.Effect<A, E | unknown> => {
  const logs: Logs = []
  return Effect.gen(function*() {
    yield* exclusive
    const database = yield* clusterDatabase(adminUrl)
    const { start } = yield* cluster({ DATABASE_URL: database.url, ...env }, logs)
    return yield* body({ sql: database.sql, start, url: database.url })
  }).pipe(
    Effect.scoped,
    Effect.tapErrorCause(() => Effect.sync(() => console.log(logs.join("\n\n"))))
  )
}

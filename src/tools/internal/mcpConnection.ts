/**
 * One supervised connection to one MCP server: open (spawn or dial, initialize, list every page of tools), notice
 * its loss, and bring it back.
 *
 * Why a supervisor: a stdio server is a child process that can exit at any time, and an MCP client cannot be reused
 * after its transport closed. Over Streamable HTTP a restarted stateful server no longer knows the client's session
 * id, and the SDK client keeps sending it: reconnecting therefore always builds a NEW `Client` and transport, never
 * revives the old ones. Restarts follow a jittered exponential schedule (jitter is not optional: after a shared
 * dependency dies, unjittered restarts of many servers synchronise), capped so a long outage is still retried.
 *
 * A server that stayed up for a while is restarted at once; one that dies soon after starting is crash-looping, so
 * its restarts keep backing off. A server that cannot be started at all (a missing command, a dead URL, a 401, an
 * unset header variable) is no different: it starts `Down` and the same supervisor keeps trying, so one broken
 * integration never takes the host down. Failed attempts are logged with the server's name, loudly on the 1st, 2nd,
 * 4th, 8th… in a row or when the reason changes, quietly otherwise: with the delay capped at 30 s, a server down for
 * a day would otherwise write thousands of identical warnings.
 *
 * A Streamable HTTP response stream that breaks mid-read (the server died, the network dropped) marks the connection
 * lost at once: the SDK never fails the requests waiting on such a stream, so their calls would hang until their
 * deadline and then blame the request's size.
 *
 * The connection state is a plain field, not a `Ref`: losses are noticed in SDK callbacks, and the switch to `Down`
 * must happen in the same tick, before any call can pick the dead client. A call that finds the server down waits
 * for the restart, cutting the backoff short (someone needs the server now), but only until one attempt made after
 * it arrived has failed: then it fails fast instead of spending its whole timeout on a server that is not coming
 * back soon. A listing of the tools probes the same way (`probe`, bounded by its caller): a server that is back is
 * offered again at the next burst, not when a backoff that grew during a long outage fires. Kicks share the one
 * attempt in progress, and attempts a kick starts are at least `KICK_GAP_MS` apart, so a busy host asking for a
 * server that stays down reconnects a few times a second, never in a tight loop.
 *
 * A server's tools can change while it runs (it sends `notifications/tools/list_changed`) and across a restart (a
 * new version, a different config). Both are reported to the handle's owner through `Options.onToolsChanged`, which
 * re-lists with `listTools` on the live connection.
 *
 * This module supervises; the handle and its state are mcpHandle.ts, opening and closing one client mcpOpen.ts.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { Clock, Deferred, Duration, Effect, Either, FiberId, Schedule } from "effect"
import type { Scope } from "effect"
import type * as McpConfig from "../McpConfig.js"
import type { Conn, Handle, Loss, Options } from "./mcpHandle.js"
import {
  describeError,
  describeLoss,
  downState,
  goDown,
  isNetworkFailure,
  isSessionExpired,
  lose
} from "./mcpHandle.js"
import type * as McpOAuth from "./mcpOAuth.js"
import { close, listAll, open } from "./mcpOpen.js"

/** The handle of a server, its state and loss, how `start` connects, and how a transport error reads. */
export type { Caller, Conn, Handle, Loss, Options, Phase, State } from "./mcpHandle.js"
/** The handle's state, its switch to `Down` on a loss, and the description of a loss or a transport error. */
export {
  describeError,
  describeLoss,
  isNetworkFailure,
  isSessionExpired,
  isUnsent,
  lose,
  offersResources,
  phaseOf,
  STDIO_MAX_MESSAGE
} from "./mcpHandle.js"
/** Closing a connection, finishing an OAuth authorization, and how long a stdio child is given to stop. */
export { close, finishAuthorization, stopGraceMs } from "./mcpOpen.js"

/** Up this long, a server is not crash-looping: its next loss restarts it at once, with a fresh backoff. */
const STABLE_MS = 30_000
/**
 * The least time between the starts of two attempts when the second was asked for by a call or a listing: short next
 * to a person's wait for a tool, long next to a refused connection (which fails in a millisecond and would otherwise
 * be retried as fast as callers arrive).
 */
export const KICK_GAP_MS = 250

/** Starts an attempt: takes its failure signal and arms fresh `nextFailed` / `kick` for those who arrive now. */
const attemptStarts = (handle: Handle): Deferred.Deferred<string> | undefined => {
  const s = handle.state
  if (s._tag !== "Down") return undefined
  handle.state = {
    ...s,
    nextFailed: Deferred.unsafeMake<string>(FiberId.none),
    kick: Deferred.unsafeMake<void>(FiberId.none)
  }
  return s.nextFailed
}

/** Bounded logging: the 1st, 2nd, 4th, 8th… failure in a row, or any failure whose reason changed, is a warning. */
const loud = (failures: number, changed: boolean): boolean => changed || (failures & (failures - 1)) === 0

/**
 * Restarts until connected, waiting the schedule's next delay before every attempt but the first of a stable
 * server. A call's kick cuts the current wait short. A schedule that ends leaves only kicks.
 */
const reconnect = (
  handle: Handle,
  options: Options,
  driver: Schedule.ScheduleDriver<unknown, unknown>,
  backoffFirst: boolean
): Effect.Effect<{ conn: Conn; tools: ReadonlyArray<Tool> }> =>
  Effect.gen(function*() {
    let wait = backoffFirst
    let lastStart: number | undefined
    while (true) {
      if (wait) {
        const kick = handle.state._tag === "Down" ? Deferred.await(handle.state.kick) : Effect.never
        const kicked = yield* Effect.raceFirst(
          driver.next(undefined).pipe(Effect.as(false), Effect.catchAll(() => Effect.never)),
          Effect.as(kick, true)
        )
        const since = lastStart === undefined ? KICK_GAP_MS : (yield* Clock.currentTimeMillis) - lastStart
        if (kicked && since < KICK_GAP_MS) yield* Effect.sleep(Duration.millis(KICK_GAP_MS - since))
      }
      wait = true
      lastStart = yield* Clock.currentTimeMillis
      const failed = attemptStarts(handle)
      handle.attempting = true
      const opened = yield* Effect.either(open(handle, options)).pipe(
        Effect.ensuring(Effect.sync(() => void (handle.attempting = false)))
      )
      if (Either.isRight(opened)) return opened.right
      handle.lastFailedAt = yield* Clock.currentTimeMillis
      const changed = opened.left !== handle.lastError
      handle.failures++
      handle.lastError = opened.left
      const line = `MCP server "${handle.name}" restart failed (attempt ${handle.failures}): ${opened.left}`
      yield* (loud(handle.failures, changed) ? Effect.logWarning(line) : Effect.logDebug(line)).pipe(
        Effect.annotateLogs({ mcpServer: handle.name })
      )
      if (failed !== undefined) yield* Deferred.succeed(failed, opened.left)
    }
  })

/**
 * Brings a down handle back: reconnects, publishes it `Up`, reports its tools as changed (so the owner lists them
 * again) and releases the calls that waited for it.
 */
const comeBack = (
  handle: Handle,
  options: Options,
  driver: Schedule.ScheduleDriver<unknown, unknown>,
  backoffFirst: boolean
): Effect.Effect<Conn> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      restore(reconnect(handle, options, driver, backoffFirst)),
      ({ conn }) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.suspend(() => {
            const down = handle.state
            handle.state = { _tag: "Up", conn }
            handle.since = now
            handle.failures = 0
            // The restarted server may list other tools. Noted before the waiting calls resume, so whoever waited
            // for the restart can wait for the re-list too. Re-listed on the live connection, not taken from the
            // listing `open` made: a change notified in between would be applied first, then overwritten by it.
            options.onToolsChanged(handle)
            return down._tag === "Down" ? Effect.as(Deferred.succeed(down.ready, conn), conn) : Effect.succeed(conn)
          }))
    )
  ).pipe(Effect.tap(() =>
    Effect.logInfo(`MCP server "${handle.name}" is up`).pipe(
      Effect.annotateLogs({ mcpServer: handle.name })
    )
  ))

/** Supervises the handle for as long as the scope lives: brings it up when it starts down, and back after each loss. */
const supervise = (handle: Handle, first: Conn | undefined, options: Options): Effect.Effect<never> =>
  Effect.gen(function*() {
    // One driver for the life of the server: crash loops keep backing off across restarts.
    const driver = yield* Schedule.driver(options.restart)
    let current = first ?? (yield* comeBack(handle, options, driver, true))
    let upSince = yield* Clock.currentTimeMillis
    while (true) {
      const loss = yield* Deferred.await(current.lost)
      // Lost before it was published as `Up` (a crash right after the restart): go down now.
      goDown(handle, current, loss)
      const down = handle.state
      if (down._tag !== "Down") return yield* Effect.dieMessage(`MCP server ${handle.name} lost without going down`)
      handle.since = yield* Clock.currentTimeMillis
      handle.lastError = describeLoss(loss)
      yield* Effect.logWarning(`MCP server "${handle.name}" connection lost (${describeLoss(loss)}); restarting`).pipe(
        Effect.annotateLogs({ mcpServer: handle.name, stderr: current.stderr.slice(-1024) })
      )
      yield* close(current)
      const stable = (yield* Clock.currentTimeMillis) - upSince >= STABLE_MS
      if (stable) yield* driver.reset
      current = yield* comeBack(handle, options, driver, !stable)
      upSince = yield* Clock.currentTimeMillis
    }
  })

/** A handle for one configured server, not yet started. */
export const makeHandle = (
  name: string,
  config: McpConfig.McpServer,
  now: number,
  oauth?: McpOAuth.Session
): Handle => ({
  name,
  config,
  oauth,
  state: { _tag: "Starting" },
  since: now,
  lastError: undefined,
  failures: 0,
  attempting: false,
  lastFailedAt: undefined,
  logListeners: new Set(),
  callers: new Set()
})

/**
 * Connects to the handle's server and keeps it connected for the life of the scope. Never fails: the first attempt
 * (bounded by the connect timeout) either brings it up, and its tools are returned, or leaves it `Down` with the
 * reason returned as `Left`; either way a supervisor fiber the scope interrupts brings it (back) up with the
 * restart schedule — a server that is down at start must not take the service down with it.
 * Closing the client is `shutdown`'s job, registered by the caller BEFORE `start` so that it runs after the
 * supervisor has stopped (finalizers run in reverse) and cannot race a restart.
 */
export const start = (
  handle: Handle,
  options: Options
): Effect.Effect<Either.Either<ReadonlyArray<Tool>, string>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const opened = yield* Effect.uninterruptibleMask((restore) =>
      Effect.tap(Effect.either(restore(open(handle, options))), (result) =>
        Effect.sync(() => {
          handle.state = Either.isRight(result)
            ? { _tag: "Up", conn: result.right.conn }
            : downState({ _tag: "NeverStarted", detail: result.left }, undefined)
        }))
    )
    handle.since = yield* Clock.currentTimeMillis
    if (Either.isLeft(opened)) {
      handle.failures = 1
      handle.lastError = opened.left
      yield* Effect.logWarning(
        `MCP server "${handle.name}" could not be started (${opened.left}); its tools are withdrawn while Corral ` +
          "keeps trying in the background"
      ).pipe(Effect.annotateLogs({ mcpServer: handle.name }))
    }
    yield* Effect.forkScoped(supervise(handle, Either.isRight(opened) ? opened.right.conn : undefined, options))
    return Either.map(opened, ({ tools }) => tools)
  })

/**
 * Closes whatever connection the handle holds for the host's shutdown: a stdio child is gone within about
 * 2 × `stopGraceMs` (stdin end, SIGTERM, SIGKILL). Idempotent; never fails.
 */
export const shutdown = (handle: Handle): Effect.Effect<void> =>
  Effect.suspend(() => {
    const s = handle.state
    return s._tag === "Up"
      ? close(s.conn, false, true)
      : s._tag === "Down" && s.previous !== undefined
      ? close(s.previous, false, true)
      : Effect.void
  })

/**
 * The live connection for a call: at once when up; when down, once restarted (the call kicks the backoff short),
 * or `Left` with the error of the first restart attempt started after the call arrived, when that attempt fails.
 */
export const acquire = (handle: Handle): Effect.Effect<Either.Either<Conn, string>> =>
  Effect.suspend((): Effect.Effect<Either.Either<Conn, string>> => {
    if (handle.state._tag === "Up" && handle.state.conn.loss !== undefined) {
      goDown(handle, handle.state.conn, handle.state.conn.loss)
    }
    const s = handle.state
    switch (s._tag) {
      case "Up":
        return Effect.succeed(Either.right(s.conn))
      case "Down":
        return Effect.zipRight(
          Deferred.succeed(s.kick, undefined),
          Effect.raceFirst(
            Effect.map(Deferred.await(s.ready), Either.right),
            Effect.map(Deferred.await(s.nextFailed), (error) => Either.left(`restarting it failed: ${error}`))
          )
        )
      case "Starting":
        return Effect.succeed(Either.left("it has not started yet"))
    }
  })

/**
 * Asks a down server to be tried now (the backoff cut short, as a call does) and waits until it is back or that
 * attempt failed, at most `waitMs`. Does not wait when an attempt is already under way (a server slow to answer is
 * not back: its outcome shows in the state later) or one failed less than `KICK_GAP_MS` ago (it is still down), so
 * listing often while a server is down costs almost nothing. Returns at once when the server is up or still
 * starting. Never fails: the caller reads the state afterwards.
 */
export const probe = (handle: Handle, waitMs: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    if (handle.state._tag === "Up" && handle.state.conn.loss !== undefined) {
      goDown(handle, handle.state.conn, handle.state.conn.loss)
    }
    const s = handle.state
    if (s._tag !== "Down") return Effect.void
    const kick = Deferred.succeed(s.kick, undefined)
    const fresh = handle.lastFailedAt !== undefined && now - handle.lastFailedAt < KICK_GAP_MS
    if (handle.attempting || fresh) return Effect.asVoid(kick)
    return Effect.zipRight(
      kick,
      Effect.raceFirst(Effect.asVoid(Deferred.await(s.ready)), Effect.asVoid(Deferred.await(s.nextFailed))).pipe(
        Effect.timeout(Duration.millis(waitMs)),
        Effect.ignore
      )
    )
  })

/**
 * Lists every page of the handle's tools on its live connection, within `timeoutMs`. Fails with a message when the
 * server is not up (its restart reports a change, so it is listed then) or the listing fails; a stale HTTP session
 * or an unreachable server also marks the connection lost, so that the supervisor reconnects.
 */
export const listTools = (handle: Handle, timeoutMs: number): Effect.Effect<ReadonlyArray<Tool>, string> =>
  Effect.suspend(() => {
    const s = handle.state
    if (s._tag !== "Up" || s.conn.loss !== undefined) return Effect.fail("it is not connected")
    const conn = s.conn
    return Effect.tryPromise({ try: (signal) => listAll(conn.client, signal, timeoutMs), catch: (error) => error })
      .pipe(
        Effect.tapError((error) =>
          Effect.sync(() => {
            if (isSessionExpired(error)) lose(handle, conn, { _tag: "SessionExpired", detail: describeError(error) })
            else if (isNetworkFailure(error)) lose(handle, conn, { _tag: "Unreachable", detail: describeError(error) })
          })
        ),
        Effect.mapError(describeError),
        Effect.timeoutFail({
          duration: Duration.millis(timeoutMs),
          onTimeout: () => `no answer to tools/list within ${timeoutMs} ms`
        })
      )
  })

/** Completes when `conn` is noticed lost. */
export const awaitLoss = (conn: Conn): Effect.Effect<Loss> => Deferred.await(conn.lost)

/**
 * The appends' group commit: turns of any sessions numbered and inserted in one statement per batch
 * (appendBatch.ts: binary array parameters, each session's counter bumped once by its count), optionally notified in
 * the statement's transaction (SqlStore's `Options.notify`). An append completes only after the statement that
 * carried it committed; one whose session does not exist fails alone, and a data error in one row fails only it.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Exit, Schema } from "effect"
import type { Array as Arr, Duration, Scope } from "effect"
import { PersistenceFailed } from "../../domain/Errors.js"
import { TurnEntry } from "../../domain/Message.js"
import type { Turn } from "../../domain/Message.js"
import * as Metrics from "../../telemetry/Metrics.js"
import type { Appended } from "../SessionStore.js"
import * as AppendBatch from "./appendBatch.js"
import type { Append } from "./appendBatch.js"
import { persist, sqlState, timedOut } from "./failure.js"
import * as GroupCommit from "./groupCommit.js"
import type * as Overload from "./overload.js"
import { isRowError } from "./sessionWrites.js"

const decodeEntry = Schema.decodeUnknown(TurnEntry)

const noSession = (sessionId: string) =>
  new PersistenceFailed({ operation: "appendTurn", message: `no session "${sessionId}"` })

/** An append the database did not answer in time (it may still land: the next read shows whether it did). */
const appendTimedOut = (waitedMs: number, overloaded: boolean) => timedOut("appendTurn", waitedMs, overloaded)

/** How the appends are batched (SqlStore.Options). */
export interface Options {
  readonly notify?: {
    readonly channel: string
    readonly payloads: (turns: ReadonlyArray<Turn>) => ReadonlyArray<string>
  }
  readonly lanes: number
  readonly maxItems: number
  readonly maxWeight: number
  readonly window?: Duration.DurationInput
  readonly patience: Overload.Liveness
}

/**
 * Starts the appends' writers in the current scope. `submit` queues an append (its deadline on its item);
 * `writeBatch` writes a batch at once on the connection in context (inside a caller's transaction). Both answer one
 * Exit per append, failures as `PersistenceFailed`.
 */
export const make = (options: Options): Effect.Effect<
  {
    readonly submit: (append: Append, timeoutMs?: number) => Effect.Effect<Appended, PersistenceFailed>
    readonly writeBatch: (
      batch: Arr.NonEmptyReadonlyArray<Append>
    ) => Effect.Effect<ReadonlyArray<Exit.Exit<Appended, PersistenceFailed>>, PersistenceFailed>
  },
  never,
  SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const notify = options.notify
    /**
     * Numbers and inserts a batch of turns of any sessions in one statement (internal/appendBatch.ts: binary array
     * parameters, each session's counter bumped once by its count). Resolves with one Exit per append, in batch
     * order; an append whose session does not exist fails alone.
     */
    /** The batch's turns (closing turns first) notified in the statement's transaction: see `Options.notify`. */
    const notified = (exits: ReadonlyArray<Exit.Exit<Appended, PersistenceFailed>>) => {
      if (notify === undefined) return Effect.succeed(exits)
      const turns: Array<Turn> = []
      for (const exit of exits) {
        if (Exit.isFailure(exit)) continue
        const { closed, ...turn } = exit.value
        if (closed !== undefined) turns.push(closed)
        turns.push(turn)
      }
      const payloads = notify.payloads(turns)
      if (payloads.length === 0) return Effect.succeed(exits)
      return Effect.as(
        sql`SELECT count(pg_notify(${notify.channel}, p)) FROM unnest(${payloads}::text[]) AS p`,
        exits
      )
    }

    const insertBatch = (batch: ReadonlyArray<Append>) =>
      Effect.suspend(() => {
        const expanded = AppendBatch.expand(batch)
        const encoded = AppendBatch.encode(expanded.rows)
        const written = sql.unsafe(AppendBatch.statement, encoded.params).values.pipe(
          Effect.flatMap((rows) => {
            const { bases, closed, seqs } = AppendBatch.readBack(encoded, rows)
            return Effect.forEach(batch, (append, i): Effect.Effect<Exit.Exit<Appended, PersistenceFailed>> => {
              const row = expanded.at[i]!
              const seq = seqs[row]
              if (seq === undefined) return Effect.succeed(Exit.fail(noSession(append.sessionId)))
              const turn: Appended = { sessionId: append.sessionId, seq, at: append.at, entry: append.entry }
              const inBatch = expanded.closedBy[i]!
              if (inBatch >= 0) {
                const closing = expanded.rows[inBatch]!
                return Effect.succeed(
                  Exit.succeed({ ...turn, closed: { ...turn, seq: seqs[inBatch]!, entry: closing.entry } })
                )
              }
              const position = encoded.position[row]!
              const stored = encoded.rank[row] === 1 ? closed[position] : undefined
              if (stored === undefined) return Effect.succeed(Exit.succeed(turn))
              // The closing entry another writer built (Pairing.ts), as the database returned it.
              return decodeEntry(typeof stored === "string" ? JSON.parse(stored) : stored).pipe(
                Effect.orDie,
                Effect.map((entry) => Exit.succeed({ ...turn, closed: { ...turn, seq: bases[position]!, entry } }))
              )
            })
          }),
          Effect.flatMap(notified)
        )
        return (notify === undefined ? written : sql.withTransaction(written)).pipe(
          // Two processes' batches can lock shared sessions in different orders; Postgres aborts one of them
          // whole (nothing was written), so running it again is safe.
          Effect.retry({ times: 2, while: (error) => sqlState(error) === "40P01" })
        )
      })

    const writeBatch = (batch: Arr.NonEmptyReadonlyArray<Append>) =>
      Effect.suspend(() => {
        Metrics.storeAppendBatch.unsafeUpdate(batch.length, [])
        return insertBatch(batch)
      }).pipe(
        // One bad row must not fail its neighbours: on a data error, write the batch's rows one by one, in order.
        Effect.catchAll((error) =>
          batch.length > 1 && isRowError(error)
            ? Effect.forEach(batch, (append) =>
              insertBatch([append]).pipe(
                persist("appendTurn"),
                Effect.flatMap((exits) => exits[0] ?? Exit.fail(noSession(append.sessionId))),
                Effect.exit
              ))
            : Effect.fail(error)
        ),
        persist("appendTurn")
      )

    const submit = yield* GroupCommit.make<Append, Appended, PersistenceFailed>({
      lanes: options.lanes,
      maxItems: options.maxItems,
      maxWeight: options.maxWeight,
      ...(options.window === undefined ? {} : { window: options.window }),
      key: (append) => append.sessionId,
      weight: (append) => append.payload.length,
      write: writeBatch,
      closed: () => new PersistenceFailed({ operation: "appendTurn", message: "the store is shutting down" }),
      timedOut: (_, waitedMs, extended) => appendTimedOut(waitedMs, extended),
      patience: options.patience
    })
    return { submit, writeBatch }
  })

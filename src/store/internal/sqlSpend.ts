/**
 * The money methods of the SQL store: usage summed from the trajectories (by the function the memory store uses, so
 * the two cannot disagree) and the org's daily spend, held and settled atomically in `org_spend`
 * (migrations/0007_org_spend.ts), so processes and cluster nodes sharing a database agree.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Context } from "effect"
import { Trajectory } from "../../domain/Trajectory.js"
import * as OrgBudget from "../../rails/OrgBudget.js"
import type { SessionStore } from "../SessionStore.js"
import { persist } from "./failure.js"
import * as Ledger from "./ledger.js"

type Methods = Pick<Context.Tag.Service<SessionStore>, "usage" | "holdSpend" | "settleSpend" | "daySpend">

const decodeTrajectories = Schema.decodeUnknown(Schema.Array(Schema.Struct({ payload: Trajectory })))
const decodeHold = Schema.decodeUnknown(
  Schema.Tuple(
    Schema.Struct({ granted: Schema.NumberFromString, spent: Schema.NumberFromString, held: Schema.NumberFromString })
  )
)
const decodeSpent = Schema.decodeUnknown(Schema.Array(Schema.Struct({ spent: Schema.NumberFromString })))

/** The money methods over `sql`. */
export const make = (sql: SqlClient.SqlClient): Methods => ({
  // Summed here from the payloads, by the function the memory store uses: the two stores cannot disagree.
  usage: (orgId, from, to) =>
    sql`SELECT payload FROM trajectories
        WHERE org_id = ${orgId} AND started_at >= ${from - Ledger.lookBehindMs} AND started_at < ${to}`.pipe(
      Effect.flatMap(decodeTrajectories),
      Effect.map((rows) => Ledger.rows(rows.map((row) => row.payload), from, to)),
      persist("usage")
    ),

  holdSpend: (orgId, day, perDayMicros, wantMicros, at) =>
    sql`SELECT granted::text, spent::text, held::text FROM corral_hold_spend(
        ${orgId}, ${day}, ${perDayMicros}, ${wantMicros}, ${at}, ${at + OrgBudget.holdLifetimeMs})`.pipe(
      Effect.flatMap(decodeHold),
      Effect.map(([row]) => ({ granted: row.granted, tally: { spentMicros: row.spent, heldMicros: row.held } })),
      persist("holdSpend")
    ),

  settleSpend: (orgId, day, heldMicros, spentMicros) =>
    sql`UPDATE org_spend SET spent_micros = spent_micros + ${spentMicros},
        held_micros = GREATEST(0, held_micros - ${heldMicros})
        WHERE org_id = ${orgId} AND day = ${day}`.pipe(Effect.asVoid, persist("settleSpend")),

  daySpend: (orgId, day) =>
    sql`SELECT spent_micros::text AS spent FROM org_spend WHERE org_id = ${orgId} AND day = ${day}`.pipe(
      Effect.flatMap(decodeSpent),
      Effect.map((rows) => rows[0]?.spent ?? 0),
      persist("daySpend")
    )
})

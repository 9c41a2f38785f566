/**
 * The org's daily budget at a model call (`rails/OrgBudget`): the hold the gate takes before the call and settles
 * after it, live against the store or, in a replay, as recorded.
 *
 * Live: `hold` asks the store for the call's worst case (one atomic step across every process on the database) and
 * `settle` adds what the call's attempts cost to the day's spend and releases the hold. Settling never fails the
 * burst: the call was made and billed; a settlement the store refused is logged with the session id (the day's spend
 * then misses it, and the trajectory still has it) — the org's holds of that call stop counting with the hold
 * lifetime.
 *
 * Replay: a call the record shows granted less (`org_budget` decisions, by call number) is granted the same; every
 * other call got its whole worst case.
 */
import { Effect } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { RailDecision } from "../domain/Trajectory.js"
import type { OrgDayTally } from "../domain/Usage.js"
import * as OrgBudget from "../rails/OrgBudget.js"
import type { SessionStore } from "../store/SessionStore.js"

/** What a hold was granted, on which day, with the day's tally before it. */
export interface Hold {
  readonly day: string
  readonly resetsAt: number
  readonly granted: number
  readonly tally: OrgDayTally
  /** A replay's grant: the recorded outcome, after the recorded wait; the gate does not wait again. */
  readonly final?: boolean
}

/** The org's budget as one burst's calls meet it. */
export interface OrgGate {
  readonly orgId: string
  /** The daily budget, micro-dollars. */
  readonly perDay: number
  /** Holds up to `want` micro-dollars for the `call`-th model call of the burst, at `now`. */
  readonly hold: (want: number, call: number, now: number) => Effect.Effect<Hold, PersistenceFailed>
  /** Ends `hold`: `spent` is what the call's attempts cost. */
  readonly settle: (hold: Hold, spent: number) => Effect.Effect<void>
}

/** The gate of `orgId` over the store. */
export const live = (
  store: SessionStore["Type"],
  orgId: string,
  perDay: number,
  sessionId: string
): OrgGate => ({
  orgId,
  perDay,
  hold: (want, _call, now) => {
    const { day, resetsAt } = OrgBudget.dayOf(now)
    return Effect.map(
      store.holdSpend(orgId, day, perDay, want, now),
      ({ granted, tally }): Hold => ({ day, resetsAt, granted, tally })
    )
  },
  settle: (hold, spent) =>
    hold.granted === 0 && spent === 0 ? Effect.void : store.settleSpend(orgId, hold.day, hold.granted, spent).pipe(
      Effect.catchAll((error) =>
        Effect.logWarning(
          `session ${sessionId}: the org's spend of ${spent} micro-dollars on ${hold.day} was not counted ` +
            `(${error.operation}: ${error.message}); its daily budget will not see it`
        )
      ),
      Effect.uninterruptible
    )
})

/** The gate of a replay: grants what the record says each call was granted. */
export const replay = (orgId: string, perDay: number, decisions: ReadonlyArray<RailDecision>): OrgGate => {
  const recorded = new Map<number, Extract<RailDecision, { _tag: "org_budget" }>>()
  for (const d of decisions) if (d._tag === "org_budget") recorded.set(d.call, d)
  return {
    orgId,
    perDay,
    hold: (want, call, now) => {
      const { day, resetsAt } = OrgBudget.dayOf(now)
      const d = recorded.get(call)
      if (d === undefined) {
        return Effect.succeed({ day, resetsAt, granted: want, tally: { spentMicros: 0, heldMicros: 0 }, final: true })
      }
      const hold: Hold = {
        day,
        resetsAt,
        granted: d.grantedMicros,
        tally: { spentMicros: d.spentMicros, heldMicros: d.heldMicros },
        final: true
      }
      // The recorded wait for the org's calls in flight takes the same time on the replay's clock.
      return d.waitedMs > 0 ? Effect.as(Effect.sleep(d.waitedMs), hold) : Effect.succeed(hold)
    },
    settle: () => Effect.void
  }
}

/**
 * OrgBudget — a daily spending ceiling per org, held across every session, process and node of the org.
 *
 * Prevents: an org whose agents burn through its money for the day, many sessions at once, each within its own
 * `costPerSession`. A session's budget cannot see its neighbours; this one is counted where they all meet: the store.
 *
 * How the bound holds under concurrency: before each model call the gate asks the store to HOLD the call's worst case
 * (its input estimate plus its output cap at the route's highest prices, `Cost`), and the store grants, in one
 * atomic step, at most what is left of the day's budget after what was spent AND what other calls hold. A call is sent
 * with its output cap lowered to fit its grant, or not made (the burst exits `cost_budget`). When the call ends, its
 * attempts' real cost is added to the day's spend and the hold is released. So calls in flight at once — in one
 * process or in many sharing a database — never jointly exceed what is left; what can still pass the budget is what
 * can pass a session's: the input estimate's error and the retries of one call (each attempt bills again), at most
 * one call per process that is between its hold and its settlement.
 *
 * A process that dies between hold and settlement leaves its hold counted (never an overspend: the org stops a
 * little early). Holds expire when the org has taken none for `holdLifetimeMs` (15 min, past the longest a call can
 * run: a burst's active time is at most 5 min), or with the day.
 *
 * The day is the UTC day; the budget resets at UTC midnight. Budgets are configured per org, with a default for every
 * org (`"*"`); no entry means no daily budget. Money in integer micro-dollars.
 */
import { Context, Schema } from "effect"
import { utcDay } from "../domain/Usage.js"

/** One org's ceiling: micro-dollars per UTC day. */
export const DailyBudget = Schema.Struct({
  perDay: Schema.NonNegativeInt.annotations({
    description: "What the org's sessions may spend per UTC day, in integer micro-dollars (1 USD = 1,000,000)"
  })
})
export type DailyBudget = typeof DailyBudget.Type

/** `orgBudgets`: by org id, and `"*"` for every org not named. */
export const Settings = Schema.Record({ key: Schema.String, value: DailyBudget })
export type Settings = typeof Settings.Type

/** The org budgets in force. A `Context.Reference`: absent means none (no org has a daily budget). */
export class OrgBudgets extends Context.Reference<OrgBudgets>()("corral/rails/OrgBudgets", {
  defaultValue: (): Settings => ({})
}) {}

/** The daily budget of `orgId` in micro-dollars, or `undefined` when it has none. */
export const perDayOf = (settings: Settings, orgId: string): number | undefined =>
  (Object.hasOwn(settings, orgId) ? settings[orgId] : settings["*"])?.perDay

/** How long a hold counts after the org's last hold (a hold of a process that died stops counting then). */
export const holdLifetimeMs = 15 * 60_000

/**
 * How long a call waits when what is left of the day's budget is held by the org's other calls in flight (they
 * settle at their real cost, mostly far under their worst case): a minute's share of a burst's active time, past
 * which the call is not made and the burst ends `cost_budget`.
 */
export const holdWaitMs = 30_000

/**
 * The output cap of a call that has none, under an org budget: a hold needs a worst case. 8,192 tokens is the
 * Anthropic adapter's own default cap.
 */
export const uncappedOutputTokens = 8192

/** The day a time falls on (`YYYY-MM-DD`, UTC) and when that day's budget resets (the next UTC midnight). */
export const dayOf = (now: number): { readonly day: string; readonly resetsAt: number } => {
  const day = utcDay(now)
  return { day, resetsAt: Date.parse(`${day}T00:00:00.000Z`) + 86_400_000 }
}

/**
 * What a hold of `want` micro-dollars is granted when `spent` is spent and `held` held of `perDay`: as much as is
 * left, at most `want`, never below 0. The store applies this rule atomically (both stores: the memory store in one
 * synchronous step, the SQL store in one row-locked statement).
 */
export const grant = (perDay: number, spent: number, held: number, want: number): number =>
  Math.max(0, Math.min(want, perDay - spent - held))

/** Micro-dollars as dollars for people. */
const usd = (micros: number): string => `$${(micros / 1_000_000).toFixed(2)}`

/** Why a burst of `orgId` does not start or its call is not made: for errors, notices and logs. */
export const exhaustedMessage = (orgId: string, perDay: number, spent: number, resetsAt: number): string =>
  `org "${orgId}" has spent ${usd(spent)} (${spent} micro-dollars) of its daily budget of ${usd(perDay)} ` +
  `(${perDay}); it resets at ${new Date(resetsAt).toISOString()}`

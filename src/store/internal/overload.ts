/**
 * Overload is not an outage: a store operation waiting behind a flood of this process's own statements gets more
 * time while the database keeps answering, and fails at its persistence timeout only when the database went quiet.
 *
 * The failure it prevents: 5,000 sessions started at once queue tens of thousands of statements (the starts' accepts,
 * the followers' reads) in the 10-connection pool. A running burst's turn waited behind them past the 10 s persistence
 * timeout — the bound that exists to notice a database that stopped answering — and the burst landed `crashed` while
 * the database answered statements all along (13–19 sessions in every such run; docs/benchmarks.md at 09f4c1e, "5,000 at once").
 * Giving the flood's own statements a lower priority, a gate or a connection of their own starved something else
 * instead (measured there); the flood has to wait somewhere, and the caller waiting longer is the honest place.
 *
 * The rule, at an operation's deadline: if some statement of this store was answered since the operation started (or
 * since it last got more time), the database is busy, not gone, and the operation waits another half timeout; if
 * none was, it fails as before — so an outage is still noticed within the timeout, or within half a timeout more
 * when it began just after the operation started. Every wait keeps a bound: `ceilingMs`, six timeouts (60 s by
 * default), however busy the database is; the failure then says it was answering other statements. A statement
 * already sent keeps the driver's own bound (`query_timeout`, `statement_timeout`: the persistence timeout,
 * Database.ts), so only the time spent queued in this process is ever extended; the pool's wait for a connection is
 * bounded by the same ceiling.
 */
import type { Patience } from "../../internal/boundedWait.js"

/** How many persistence timeouts an operation may wait in all while the database keeps answering others. */
const ceilingFactor = 6

/** The most an operation with persistence timeout `timeoutMs` waits, however busy the database is. */
export const ceilingMs = (timeoutMs: number): number => timeoutMs * ceilingFactor

/** The answers of one store's database, counted (see the module header). */
export class Liveness implements Patience {
  /** Statements answered so far. */
  answers = 0

  answered(): void {
    this.answers++
  }

  more(waitedMs: number, timeoutMs: number, seen: number): number {
    if (this.answers === seen) return 0
    const left = ceilingMs(timeoutMs) - waitedMs
    return left <= 0 ? 0 : Math.min(left, Math.max(1, Math.ceil(timeoutMs / 2)))
  }
}

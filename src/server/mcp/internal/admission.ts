/**
 * admission — whether `/mcp` may open a new session for a principal, and which session makes room for it.
 *
 * The failure it prevents: one org locking every org out. MCP hosts seldom end their sessions (the SDK's
 * `Client.close()` sends no DELETE), so with one global cap a single org that opens sessions and walks away — a test
 * suite, a crash-looping host — fills it, and every other org is refused until the idle expiry frees a place.
 * So places are held per org (`maxSessionsPerOrg`), and the global cap (`maxSessions`) is only a backstop for memory.
 *
 * At its org's cap, a newcomer closes one of the org's sessions with no request in flight — one with nothing open
 * before one that only holds its `GET /mcp` stream (a listener); within each, the principal's own before the rest of
 * its org's, and the least recently used first — and opens in its place: an org that leaks sessions only recycles its own places. A
 * listener counts as closable because a host that fails without closing its client (the conformance suite's scenarios
 * on their error path do) keeps its stream open until its process exits: were listeners never closed, such a host
 * would lock its own org out of `/mcp` for as long as it runs. A live host whose stream is closed this way gets 404 on
 * its next request and, as the MCP transport requires, opens a new session.
 * At the global cap it closes, by the same order, a session with no request in flight of the org holding the most
 * sessions (only of its own org or of one holding more than its own: a big org never pushes a small one out).
 * Only when every candidate has a request in flight is the newcomer refused, with the bound it hit: 429 for its org's cap (its own
 * sessions hold the places), 503 for the server's. A session that is opening (its `initialize` not answered yet)
 * counts, and is never closed.
 */

/** A session as admission sees it. */
export interface Held {
  readonly id: string
  readonly orgId: string
  readonly userId: string
  /** When its last request started or ended (epoch ms). */
  readonly lastSeen: number
  /** Requests in flight on it now (a POST being answered); a session with any is busy, never closed to make room. */
  readonly inFlight: number
  /** `GET /mcp` streams open on it (a listening host): closable, after the sessions with nothing open. */
  readonly streams: number
}

/** The bounds admission enforces. */
export interface Bounds {
  readonly maxSessions: number
  readonly maxSessionsPerOrg: number
}

/** Open at once; open after closing `evict`; or refuse with `status` and a message naming the bound and what to do. */
export type Decision =
  | { readonly _tag: "Open" }
  | { readonly _tag: "Evict"; readonly evict: Held; readonly why: string }
  | { readonly _tag: "Refuse"; readonly status: 429 | 503; readonly message: string }

const leastRecent = (a: Held, b: Held): number => a.lastSeen - b.lastSeen

/** Sessions with nothing open before listeners; then the least recently used. */
const closableFirst = (a: Held, b: Held): number => Number(a.streams > 0) - Number(b.streams > 0) || leastRecent(a, b)

/** The decision for a new session of `principal` among `held` (every session open or opening). Pure. */
export const decide = (
  held: ReadonlyArray<Held>,
  principal: { readonly orgId: string; readonly userId: string },
  bounds: Bounds
): Decision => {
  const counts = new Map<string, number>()
  for (const h of held) counts.set(h.orgId, (counts.get(h.orgId) ?? 0) + 1)
  const mine = counts.get(principal.orgId) ?? 0
  const idle = held.filter((h) => h.inFlight === 0)
  if (mine >= bounds.maxSessionsPerOrg) {
    const own = idle.filter((h) => h.orgId === principal.orgId)
    const evict = own.sort((a, b) =>
      Number(a.streams > 0) - Number(b.streams > 0) ||
      Number(a.userId !== principal.userId) - Number(b.userId !== principal.userId) ||
      leastRecent(a, b)
    )[0]
    if (evict !== undefined) {
      return {
        _tag: "Evict",
        evict,
        why: `its org ${principal.orgId} is at ${bounds.maxSessionsPerOrg} sessions (server.mcp.maxSessionsPerOrg) ` +
          "and this was its least recently used session with no request in flight"
      }
    }
    return {
      _tag: "Refuse",
      status: 429,
      message: `too many open MCP sessions for org ${principal.orgId} (at most ${bounds.maxSessionsPerOrg} per org, ` +
        `server.mcp.maxSessionsPerOrg), each with a request in flight: close one (DELETE /mcp with its ` +
        "Mcp-Session-Id) or retry once one of them has finished"
    }
  }
  if (held.length >= bounds.maxSessions) {
    const evict = idle
      .filter((h) => h.orgId === principal.orgId || (counts.get(h.orgId) ?? 0) > mine)
      .sort((a, b) => (counts.get(b.orgId) ?? 0) - (counts.get(a.orgId) ?? 0) || closableFirst(a, b))[0]
    if (evict !== undefined) {
      return {
        _tag: "Evict",
        evict,
        why: `the server is at ${bounds.maxSessions} sessions (server.mcp.maxSessions) and this was the least ` +
          `recently used one with no request in flight of org ${evict.orgId}, which holds the most`
      }
    }
    return {
      _tag: "Refuse",
      status: 503,
      message: `too many open MCP sessions (at most ${bounds.maxSessions}, server.mcp.maxSessions), each with a ` +
        "request in flight: close one (DELETE /mcp with its Mcp-Session-Id) or retry once one has finished"
    }
  }
  return { _tag: "Open" }
}

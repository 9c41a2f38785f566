/**
 * admission — whether `/mcp` may open a new session for a principal, and which idle session makes room for it.
 *
 * The failure it prevents: one org locking every org out. MCP hosts seldom end their sessions (the SDK's
 * `Client.close()` sends no DELETE), so with one global cap a single org that opens sessions and walks away — a test
 * suite, a crash-looping host — fills it, and every other org is refused until the idle expiry frees a place.
 * So places are held per org (`maxSessionsPerOrg`), and the global cap (`maxSessions`) is only a backstop for memory.
 *
 * At its org's cap, a newcomer closes the org's least recently used IDLE session (no request or stream open: its host
 * has gone quiet) — the principal's own first, then its org's — and opens in its place: an org that leaks sessions
 * only recycles its own places. At the global cap it closes the least recently used idle session of the org holding the
 * most sessions (only of its own org or of one holding more than its own: a big org never pushes a small one out).
 * Only when every candidate is busy is the newcomer refused, with the bound it hit: 429 for its org's cap (its own
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
  /** Requests (streams included) open on it now; a session with any is busy, never closed to make room. */
  readonly inFlight: number
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
    const evict = [...own.filter((h) => h.userId === principal.userId).sort(leastRecent), ...own.sort(leastRecent)][0]
    if (evict !== undefined) {
      return {
        _tag: "Evict",
        evict,
        why: `its org ${principal.orgId} is at ${bounds.maxSessionsPerOrg} sessions (server.mcp.maxSessionsPerOrg) ` +
          "and this was its least recently used idle one"
      }
    }
    return {
      _tag: "Refuse",
      status: 429,
      message: `too many open MCP sessions for org ${principal.orgId} (at most ${bounds.maxSessionsPerOrg} per org, ` +
        `server.mcp.maxSessionsPerOrg), each with a request or stream open: close one (DELETE /mcp with its ` +
        "Mcp-Session-Id) or retry once one of them has finished"
    }
  }
  if (held.length >= bounds.maxSessions) {
    const evict = idle
      .filter((h) => h.orgId === principal.orgId || (counts.get(h.orgId) ?? 0) > mine)
      .sort((a, b) => (counts.get(b.orgId) ?? 0) - (counts.get(a.orgId) ?? 0) || leastRecent(a, b))[0]
    if (evict !== undefined) {
      return {
        _tag: "Evict",
        evict,
        why: `the server is at ${bounds.maxSessions} sessions (server.mcp.maxSessions) and this was the least ` +
          `recently used idle one of org ${evict.orgId}, which holds the most`
      }
    }
    return {
      _tag: "Refuse",
      status: 503,
      message: `too many open MCP sessions (at most ${bounds.maxSessions}, server.mcp.maxSessions), each with a ` +
        "request or stream open: close one (DELETE /mcp with its Mcp-Session-Id) or retry once one has finished"
    }
  }
  return { _tag: "Open" }
}

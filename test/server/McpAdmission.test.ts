/**
 * The admission decision of `/mcp` (src/server/mcp/internal/admission.ts), on its own: who makes room for a new
 * session, and when one is refused. The same rules over real HTTP: McpOrgs.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Admission from "../../src/server/mcp/internal/admission.js"

const held = (
  id: string,
  orgId: string,
  userId: string,
  lastSeen: number,
  inFlight = 0,
  streams = 0
): Admission.Held => ({
  id,
  orgId,
  userId,
  lastSeen,
  inFlight,
  streams
})

const bounds = { maxSessions: 6, maxSessionsPerOrg: 3 }

describe("Admission.decide", () => {
  it("opens at once below both bounds", () => {
    expect(Admission.decide([held("a1", "acme", "alice", 1)], { orgId: "acme", userId: "alice" }, bounds)).toEqual({
      _tag: "Open"
    })
  })

  it("at the org's cap, closes the principal's least recently used idle session, then the org's", () => {
    const sessions = [
      held("ann1", "acme", "ann", 1),
      held("alice2", "acme", "alice", 5),
      held("alice1", "acme", "alice", 3, 1)
    ]
    const alice = Admission.decide(sessions, { orgId: "acme", userId: "alice" }, bounds)
    expect(alice).toMatchObject({ _tag: "Evict", evict: { id: "alice2" } })
    const bob = Admission.decide(sessions, { orgId: "acme", userId: "bob" }, bounds)
    expect(bob).toMatchObject({ _tag: "Evict", evict: { id: "ann1" } })
  })

  it("refuses with 429 at the org's cap when every session of the org is busy, whatever other orgs hold", () => {
    const sessions = [
      held("a1", "acme", "alice", 1, 1),
      held("a2", "acme", "alice", 2, 1),
      held("a3", "acme", "ann", 3, 2),
      held("b1", "bravo", "bob", 0)
    ]
    const decision = Admission.decide(sessions, { orgId: "acme", userId: "alice" }, bounds)
    expect(decision).toMatchObject({ _tag: "Refuse", status: 429 })
    expect(Admission.decide(sessions, { orgId: "bravo", userId: "bob" }, bounds)).toEqual({ _tag: "Open" })
  })

  it("at the global cap, takes from the org holding the most, never from a smaller org", () => {
    const sessions = [
      held("a1", "acme", "alice", 9),
      held("a2", "acme", "alice", 8),
      held("a3", "acme", "alice", 7),
      held("b1", "bravo", "bob", 1),
      held("b2", "bravo", "bob", 2),
      held("c1", "cargo", "carol", 0)
    ]
    expect(Admission.decide(sessions, { orgId: "delta", userId: "dan" }, bounds)).toMatchObject({
      _tag: "Evict",
      evict: { id: "a3" }
    })
    // cargo holds 1: acme (3) holds more, and goes first.
    expect(Admission.decide(sessions, { orgId: "cargo", userId: "carol" }, bounds)).toMatchObject({
      evict: { id: "a3" }
    })
    // Only busy sessions in orgs holding more, and nothing idle of its own: refused with 503.
    const busy = sessions.map((s) => s.orgId === "cargo" ? s : { ...s, inFlight: 1 })
    expect(Admission.decide(busy, { orgId: "bravo", userId: "bob" }, { ...bounds, maxSessionsPerOrg: 5 }))
      .toMatchObject({
        _tag: "Refuse",
        status: 503
      })
  })

  it("closes a session with nothing open before a listener (a GET stream only), and a listener before refusing", () => {
    const acme = { orgId: "acme", userId: "alice" }
    const sessions = [
      held("listener-old", "acme", "alice", 1, 0, 1),
      held("idle-new", "acme", "alice", 9),
      held("busy", "acme", "alice", 0, 1, 1)
    ]
    expect(Admission.decide(sessions, acme, bounds)).toMatchObject({ _tag: "Evict", evict: { id: "idle-new" } })
    // Another principal's session with nothing open goes before the principal's own listener.
    const mixed = [held("own-listener", "acme", "alice", 1, 0, 1), held("anns-idle", "acme", "ann", 9), sessions[2]!]
    expect(Admission.decide(mixed, acme, bounds)).toMatchObject({ _tag: "Evict", evict: { id: "anns-idle" } })
    // Every session listening (hosts that never closed their clients): the least recently used listener makes room.
    const listening = [held("l2", "acme", "alice", 5, 0, 1), held("l1", "acme", "alice", 2, 0, 1), sessions[2]!]
    expect(Admission.decide(listening, acme, bounds)).toMatchObject({ _tag: "Evict", evict: { id: "l1" } })
    // Only a request in flight makes a session busy: then the newcomer is refused.
    const busy = listening.map((h) => ({ ...h, inFlight: 1 }))
    expect(Admission.decide(busy, acme, bounds)).toMatchObject({
      _tag: "Refuse",
      status: 429,
      message: expect.stringContaining("each with a request in flight")
    })
  })
})

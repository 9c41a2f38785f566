/**
 * What the store suites build their data from: unique orgs and sessions (each test works in its own, so suites can
 * share one database), and a user turn.
 */
import { randomUUID } from "node:crypto"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import type { TurnEntry } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import type { Session, SessionState } from "../../src/domain/Session.js"
import { initialState } from "../../src/domain/Session.js"

export const uid = (): string => randomUUID().replaceAll("-", "")

export const newOrg = (): string => `org_${uid().slice(0, 12)}`

/** A session of `orgId` (user `u1`, agent `triage` v1) with a fresh id, created at 1,000. */
export const newSession = (
  orgId: string,
  state: SessionState = initialState,
  scope = "incident:INC-42"
): Session => ({
  id: SessionId.make(`ses_${uid()}`),
  principal: new Principal({ orgId, userId: "u1" }),
  scope: Scope.make(scope),
  agentId: AgentId.make("triage"),
  agentVersion: 1,
  createdAt: 1_000,
  updatedAt: 1_000,
  state
})

export const user = (text: string): TurnEntry => ({ kind: "user", text })

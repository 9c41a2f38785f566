/**
 * Refusals every driver words the same way, so callers (and the contract suite) see one behaviour whatever the
 * store. Another org's session is reported exactly like a missing one: nothing reveals that it exists.
 */
import { ScopeMismatch } from "../../domain/Errors.js"

/** What `actual` says when the inherited session is not visible to the org (missing, or another org's). */
export const notInOrg = "(no such session in this org)"

/** The refusal of an inherited artifact outside the inheriting session's org and scope. */
export const crossScope = (
  sessionId: string,
  fromSessionId: string,
  expected: string,
  actual: string | undefined
): ScopeMismatch =>
  new ScopeMismatch({
    message: `session "${fromSessionId}" is not a session of the org and scope of session "${sessionId}"`,
    expected,
    actual: actual ?? notInOrg
  })

/**
 * Approvals — the tokens that let a person decide a pending write.
 *
 * Prevents: a write that runs without the decision of the person it belongs to, or on a decision that was meant
 * for something else. A token is random (192 bits from the CSPRNG, `Ids.token`), shown once and stored only as its
 * SHA-256, single-use, expiring, and bound to the session's principal (org and user), the session, the call, the
 * tool and the exact arguments that were shown (their SHA-256). Everything else is refused with the reason.
 *
 * Why the default lifetime is one hour: long enough for an on-call person to read the pending call and decide, short
 * enough that a token found later in a log, a chat or a browser history no longer approves anything. A session whose
 * tokens lapsed is not stuck: its own user asks for fresh ones (`renew`), which revokes the old ones.
 */
import { Context, Option } from "effect"
import { createHash } from "node:crypto"
import type { ApprovalRecord, IssuedToken } from "../domain/Approval.js"
import type { Principal } from "../domain/Principal.js"
import type { PendingConfirmation, Session } from "../domain/Session.js"
import { latestRound } from "../domain/Session.js"

/** How approval tokens are issued. */
export interface Settings {
  /** How long an issued token approves, in milliseconds (default one hour). */
  readonly ttlMs: number
}

/** The approval settings in force. A `Context.Reference`: absent from the context means the defaults. */
export class ApprovalSettings extends Context.Reference<ApprovalSettings>()("corral/tools/ApprovalSettings", {
  defaultValue: (): Settings => ({ ttlMs: 60 * 60_000 })
}) {}

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")

/** The stored form of a token. */
export const hashToken = (token: string): string => sha256(token)

/** The stored form of a call's arguments (exactly as shown, byte for byte). */
export const hashArguments = (args: string): string => sha256(args)

/** Tokens for `pending` (the writes of one session), as records to store and as tokens to show once. */
export const issue = (options: {
  readonly session: Session
  readonly pending: ReadonlyArray<PendingConfirmation>
  readonly now: number
  readonly settings: Settings
  readonly mint: () => string
}): { readonly records: ReadonlyArray<ApprovalRecord>; readonly issued: ReadonlyArray<IssuedToken> } => {
  const { now, session, settings } = options
  const expiresAt = now + settings.ttlMs
  const records: Array<ApprovalRecord> = []
  const issued: Array<IssuedToken> = []
  for (const p of options.pending) {
    const token = options.mint()
    issued.push({ callId: p.callId, token, expiresAt })
    records.push({
      tokenHash: hashToken(token),
      orgId: session.principal.orgId,
      userId: session.principal.userId,
      sessionId: session.id,
      callId: p.callId,
      turnSeq: p.turnSeq,
      tool: p.tool,
      argsHash: hashArguments(p.arguments),
      createdAt: now,
      expiresAt
    })
  }
  return { records, issued }
}

/** Why a decision was refused. */
export type Refusal = "unknown" | "other_principal" | "not_pending" | "spent" | "expired" | "mismatch"

/** What a decision with a token may do. */
export type Verdict =
  /** The token is good: decide `target` (spend the token first). */
  | { readonly _tag: "Decide"; readonly target: PendingConfirmation }
  /**
   * The token already decided `target` (its round is still the latest): the first decision stands, and this one is
   * refused as `already_decided`, naming the decision taken, so a client that retried learns what happened.
   */
  | { readonly _tag: "AlreadyDecided"; readonly target: PendingConfirmation; readonly decision: "approve" | "reject" }
  | { readonly _tag: "Refused"; readonly refusal: Refusal }

/**
 * Judges a decision by `by` with the token whose stored record is `record` (looked up by its hash within the
 * session), against the session's writes. Pure: spending the token is the caller's next step.
 */
export const check = (options: {
  readonly record: Option.Option<ApprovalRecord>
  readonly by: Principal
  readonly session: Session
  readonly now: number
}): Verdict => {
  const { by, now, session } = options
  if (Option.isNone(options.record)) return { _tag: "Refused", refusal: "unknown" }
  const record = options.record.value
  if (record.sessionId !== session.id || record.orgId !== session.principal.orgId) {
    return { _tag: "Refused", refusal: "unknown" }
  }
  if (by.orgId !== record.orgId || by.userId !== record.userId) return { _tag: "Refused", refusal: "other_principal" }
  const target = session.state.pending.find((p) => p.callId === record.callId && p.turnSeq === record.turnSeq)
  if (target === undefined) return { _tag: "Refused", refusal: record.usedAt === undefined ? "not_pending" : "spent" }
  if (target.resolution !== undefined) {
    if (record.usedAt === undefined) return { _tag: "Refused", refusal: "not_pending" }
    // A second decision while its round is the latest is told what the first was; once the session moved on, it is a
    // replay of a spent token.
    return target.turnSeq === latestRound(session.state.pending)
      ? { _tag: "AlreadyDecided", target, decision: target.resolution.decision }
      : { _tag: "Refused", refusal: "spent" }
  }
  if (record.usedAt !== undefined) return { _tag: "Refused", refusal: "spent" }
  if (record.expiresAt <= now) return { _tag: "Refused", refusal: "expired" }
  if (record.tool !== target.tool || record.argsHash !== hashArguments(target.arguments)) {
    return { _tag: "Refused", refusal: "mismatch" }
  }
  return { _tag: "Decide", target }
}

/** What the person (and the transcript) is told about a refusal. */
export const refusalText = (refusal: Refusal): string => {
  switch (refusal) {
    case "unknown":
      return "no pending write of this session has this token (it is unknown, forged or for another session)"
    case "other_principal":
      return "this token belongs to another user: only the session's own user may decide its writes"
    case "not_pending":
      return "this token is for a write that no longer waits for a decision"
    case "spent":
      return "this token was already used; ask for fresh tokens if the write still waits"
    case "expired":
      return "this token has expired; ask for fresh tokens (renew) to decide the write"
    case "mismatch":
      return "this token was issued for another tool or other arguments than the write that waits"
  }
}

/** What the person (and the transcript) is told when a token's write was already decided: which way, and by whom. */
export const alreadyDecidedText = (target: PendingConfirmation): string => {
  const resolution = target.resolution
  const taken = resolution?.decision === "reject" ? "rejected" : "approved"
  const by = resolution?.decidedBy === undefined ? "" : ` by ${resolution.decidedBy}`
  return `this token's write (${target.tool}) was already ${taken}${by}; the first decision stands and this one did nothing`
}

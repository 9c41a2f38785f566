/**
 * Where ids and secrets come from. A `Context.Reference` so tests can make them deterministic; the default draws
 * from the operating system's CSPRNG because approval tokens must be unguessable.
 */
import { Context } from "effect"
import * as RandomPool from "../internal/randomPool.js"

/**
 * Mints run ids (`run_` + 32 hex), session ids (`ses_` + 32 hex), accepted-message ids (`msg_` + 32 hex) and approval
 * tokens (url-safe, 192 bits).
 */
export interface IdGenerator {
  readonly runId: () => string
  readonly sessionId: () => string
  readonly messageId: () => string
  readonly token: () => string
}

/** The default generator: the CSPRNG's bytes (drawn a pool at a time, `internal/randomPool`). */
export const random: IdGenerator = {
  runId: () => RandomPool.hex(16, "run_"),
  sessionId: () => RandomPool.hex(16, "ses_"),
  messageId: () => RandomPool.hex(16, "msg_"),
  token: () => RandomPool.base64url(24)
}

/** A generator that counts (`run_000…1`, `ses_000…1`, `msg_000…1`, `tok_1`), for tests and replays. */
export const sequential = (): IdGenerator => {
  let n = 0
  const hex = () => (++n).toString(16).padStart(32, "0")
  return {
    runId: () => `run_${hex()}`,
    sessionId: () => `ses_${hex()}`,
    messageId: () => `msg_${hex()}`,
    token: () => `tok_${++n}`
  }
}

/** The id generator in force. */
export class Ids extends Context.Reference<Ids>()("corral/session/Ids", { defaultValue: () => random }) {}

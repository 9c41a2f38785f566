/**
 * Failure — how the CLI words an error: one readable message, never a stack trace. Typed errors carry their own
 * wording (`ConfigInvalid` lists every bad key, `InvalidRequest` every bad field); anything else falls back to its
 * message.
 */
import { Cause } from "effect"

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? Reflect.get(value, key) : undefined

/** A one-paragraph description of `error` for the terminal. */
export const describe = (error: unknown): string => {
  const tag = field(error, "_tag")
  const issues = field(error, "issues")
  if (tag === "InvalidRequest" && Array.isArray(issues)) {
    const lines: Array<string> = issues.map((i) => `  - ${String(field(i, "path"))}: ${String(field(i, "message"))}`)
    return `${String(field(error, "message"))}:\n${lines.join("\n")}`
  }
  if (tag === "ServeError") {
    const cause = field(error, "cause")
    const message = field(cause, "message")
    return `cannot listen: ${typeof message === "string" ? message : String(cause)}`
  }
  if (tag === "PersistenceFailed") {
    return `store failure (${String(field(error, "operation"))}): ${String(field(error, "message"))}`
  }
  const message = field(error, "message")
  if (typeof message === "string" && message.length > 0 && message !== "An error has occurred") {
    return typeof tag === "string" && !message.includes(tag) ? `${tag}: ${message}` : message
  }
  // A tagged error without a message (SessionNotFound, AgentNotFound...): its tag and fields say it all.
  if (typeof tag === "string" && typeof error === "object" && error !== null) {
    const fields = Object.fromEntries(Object.entries(error).filter(([k]) => k !== "_tag"))
    return `${tag} ${JSON.stringify(fields)}`
  }
  return String(error)
}

/** The description of a failed cause: its typed failure, else its defect. */
export const describeCause = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some") return describe(failure.value)
  return describe(Cause.squash(cause))
}

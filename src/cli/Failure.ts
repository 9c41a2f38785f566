/**
 * Failure — how the CLI words an error: one readable message, never a stack trace. The service's failures
 * (`CorralError`, recognised by `isCorralError`) carry their own wording (`InvalidRequest` lists every bad field,
 * `PersistenceFailed` names the store operation); so do the CLI's own (`ConfigInvalid` lists every bad key); anything
 * else falls back to its message.
 */
import { Cause } from "effect"
import type { CorralError } from "../domain/Errors.js"
import { isCorralError } from "../domain/Errors.js"

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? Reflect.get(value, key) : undefined

/** A message prefixed with its tag, unless it already names it. */
const tagged = (tag: string, message: string): string => message.includes(tag) ? message : `${tag}: ${message}`

const describeCorral = (error: CorralError): string => {
  switch (error._tag) {
    case "InvalidRequest":
      return `${error.message}:\n${error.issues.map((issue) => `  - ${issue.path}: ${issue.message}`).join("\n")}`
    case "PersistenceFailed":
      return `store failure (${error.operation}): ${error.message}`
    default:
      return tagged(error._tag, error.message)
  }
}

/** A one-paragraph description of `error` for the terminal. */
export const describe = (error: unknown): string => {
  if (isCorralError(error)) return describeCorral(error)
  const tag = field(error, "_tag")
  if (tag === "ServeError") {
    const cause = field(error, "cause")
    const message = field(cause, "message")
    return `cannot listen: ${typeof message === "string" ? message : String(cause)}`
  }
  const message = field(error, "message")
  if (typeof message === "string" && message.length > 0 && message !== "An error has occurred") {
    return typeof tag === "string" ? tagged(tag, message) : message
  }
  // A tagged error without a message: its tag and fields say it all.
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

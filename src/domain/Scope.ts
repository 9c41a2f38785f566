/**
 * What a session investigates (an incident id, a ticket, a question id). A session belongs to exactly one scope and
 * may only inherit artifacts of sessions in the same scope.
 */
import { Schema } from "effect"

/** A scope key such as `incident:INC-42`: 1-200 printable characters. */
export const Scope = Schema.NonEmptyTrimmedString.pipe(
  Schema.maxLength(200, { message: () => "a scope of at most 200 characters" }),
  Schema.brand("Scope")
)
export type Scope = typeof Scope.Type

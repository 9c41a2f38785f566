/**
 * Who acts. Every read and every write is scoped by the principal's org.
 */
import { Schema } from "effect"

/** An organisation and a user inside it. */
export class Principal extends Schema.Class<Principal>("Principal")({
  orgId: Schema.NonEmptyTrimmedString,
  userId: Schema.NonEmptyTrimmedString
}) {}

/**
 * HttpErrors — the errors only HTTP has: authentication, transport limits, an unavailable store, shutdown. The
 * domain's own errors (`domain/Errors`) get their status codes in `Api.ts`; nothing outside `server/` knows them.
 *
 * Every body is JSON with a `_tag` and a `message` that says what to do; none ever carries a stack trace or a
 * driver's error text (a store failure is logged in full and answered with `Unavailable`).
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/** A missing or wrong bearer key (401). */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 401, description: "Missing or unknown API key" })
) {}

/** The store could not serve the request; retrying later may succeed (503). */
export class Unavailable extends Schema.TaggedError<Unavailable>()(
  "Unavailable",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 503, description: "The store is unavailable or the server is shutting down" })
) {}

/** The request body is larger than `server.bodyLimitBytes` (413). */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  { message: Schema.String, limitBytes: Schema.Int },
  HttpApiSchema.annotations({ status: 413, description: "The request body exceeds the server's limit" })
) {}

/** The request body is not JSON, or not declared as JSON (415). */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 415, description: "Request bodies must be application/json" })
) {}

/** The readiness probe failed: which check, and why (503). */
export class NotReady extends Schema.TaggedError<NotReady>()(
  "NotReady",
  { message: Schema.String, checks: Schema.Record({ key: Schema.String, value: Schema.String }) },
  HttpApiSchema.annotations({ status: 503, description: "Not ready to serve (database, migrations, shutdown)" })
) {}

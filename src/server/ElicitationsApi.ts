/**
 * ElicitationsApi — `POST /v1/sessions/{id}/elicitations/{elicitationId}`: the person's answer to an MCP server's
 * question, announced on the session's stream as an `elicitation` event (see `PendingElicitations`). The contract
 * lives here and the handler in `ElicitationsHandlers`, so that `Api.ts` only adds the group.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { SessionNotFound } from "../domain/Errors.js"
import { Authentication } from "./Authentication.js"
import { Unavailable } from "./HttpErrors.js"
import { PathId } from "./InputLimits.js"
import { ElicitationNotFound } from "./PendingElicitations.js"

/** A value of a form field: MCP elicitation asks for a flat object of primitives (and string lists). */
const FieldValue = Schema.Union(Schema.String, Schema.Number, Schema.Boolean, Schema.Array(Schema.String))

/** The answer: `accept` with the values asked for (left-out values take the schema's defaults), `decline`, `cancel`. */
export const ElicitationAnswer = Schema.Union(
  Schema.Struct({
    action: Schema.Literal("accept"),
    content: Schema.optionalWith(Schema.Record({ key: Schema.String, value: FieldValue }), { exact: true })
  }),
  Schema.Struct({ action: Schema.Literal("decline", "cancel") })
).annotations({ identifier: "ElicitationAnswer" })

/** Answers to MCP servers' questions. */
export class ElicitationsGroup extends HttpApiGroup.make("elicitations")
  .add(
    HttpApiEndpoint.post("answerElicitation", "/v1/sessions/:id/elicitations/:elicitationId")
      .setPath(Schema.Struct({ id: PathId, elicitationId: PathId }))
      .setPayload(ElicitationAnswer)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(SessionNotFound, { status: 404 })
      .addError(ElicitationNotFound, { status: 404 })
      .annotate(
        OpenApi.Summary,
        "Answer an MCP server's question (an `elicitation` event) before its answerBy; then it is declined"
      )
  )
  .middleware(Authentication)
  .addError(Unavailable)
{}

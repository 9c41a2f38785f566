/**
 * Landing: every burst ends with a report, whatever its exit reason.
 *
 * First the author phase (an optional host hook that writes a richer artifact; it can fail, it can never prevent
 * what follows), then finalize: one model call WITHOUT tools asking for JSON matching the agent's report schema,
 * through the same gate and accounting as every other model call. When that call is not allowed (a ceiling, a
 * budget, exhausted providers, a cancel, a crash, an overflow, the deadline), fails, or does not validate, the
 * report is built from the exit reason and the transcript instead.
 */
import { Context, Effect, Option } from "effect"
import type { JsonSchema } from "../domain/AgentSpec.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Report } from "../domain/Report.js"
import { defaultReportSchema } from "../domain/Report.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import type * as Burst from "./Burst.js"
import * as Fallback from "./internal/fallback.js"
import * as JsonSchemaCheck from "./internal/jsonSchema.js"
import * as ModelCall from "./ModelCall.js"
import * as Prompt from "./Prompt.js"

/** What the author phase sees. */
export interface AuthorInput {
  readonly reason: ExitReason
  readonly sessionId: string
  readonly messages: ReadonlyArray<TurnEntry>
}

/** The author hook: produces an optional richer artifact. Its failures are recorded, never raised. */
export type Author = (input: AuthorInput) => Effect.Effect<unknown, unknown>

/** The author phase in force; none by default. */
export class AuthorPhase extends Context.Reference<AuthorPhase>()("corral/session/AuthorPhase", {
  defaultValue: (): Option.Option<Author> => Option.none()
}) {}

const finalizeInstruction = (schema: JsonSchema): string =>
  "Write the report of this investigation now. Reply with ONE JSON object and nothing else, valid against this " +
  `JSON Schema:\n${JSON.stringify(schema)}`

/** Parses a JSON reply, tolerating a Markdown code fence around it. */
const parse = (text: string): Option.Option<unknown> => {
  const trimmed = text.trim()
  const fenced = /^```(?:json)?\s*([\s\S]*?)\s*```$/.exec(trimmed)
  try {
    return Option.some(JSON.parse(fenced?.[1] ?? trimmed))
  } catch {
    return Option.none()
  }
}

/** The schema-valid fallback for `reason`. */
export const fallback = (
  schema: JsonSchema,
  reason: ExitReason,
  messages: ReadonlyArray<TurnEntry>,
  why: string
): Report => {
  const facts = { reason, messages }
  const validate = JsonSchemaCheck.compile(schema)
  const data = schema === defaultReportSchema ? Fallback.defaultReport(facts) : Fallback.instance(schema, facts)
  if (validate(data)) return { exitReason: reason, source: "fallback", data, fallbackReason: why }
  return {
    exitReason: reason,
    source: "fallback",
    data: Fallback.defaultReport(facts),
    fallbackReason: `${why}; the agent's report schema could not be satisfied mechanically, so the default ` +
      "report shape is used"
  }
}

/** Lands the burst: author phase, then finalize or fallback. Never fails. */
export const land = (ctx: Burst.Context, burst: Burst.Burst, reason: ExitReason): Effect.Effect<Report> =>
  Effect.gen(function*() {
    const schema = ctx.spec.reportSchema ?? defaultReportSchema
    const author = yield* AuthorPhase
    let artifact: unknown = undefined
    if (Option.isSome(author)) {
      const authored = yield* author.value({ reason, sessionId: ctx.session.id, messages: burst.messages }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.sync(() => {
            burst.errors.push({ code: "landing.author", message: String(cause) })
            return undefined
          })
        )
      )
      artifact = authored
    }
    const withArtifact = (report: Report): Report => artifact === undefined ? report : { ...report, artifact }

    if (ctx.spec.finalize === "transcript") {
      return withArtifact(fallback(schema, reason, burst.messages, "the agent writes its report from the transcript"))
    }
    if (ExitPolicy.noFinalize.has(reason)) {
      return withArtifact(fallback(schema, reason, burst.messages, `no finalize call after "${reason}"`))
    }
    const reply = yield* ModelCall.extra(ctx, burst, {
      system: Prompt.system(ctx.spec),
      messages: [...burst.messages, { kind: "user", text: finalizeInstruction(schema) }],
      tools: [],
      responseSchema: schema,
      cacheKey: ctx.session.id
    })
    if (Option.isNone(reply)) {
      return withArtifact(fallback(schema, reason, burst.messages, "the finalize call was not allowed or failed"))
    }
    const data = parse(reply.value.text)
    if (Option.isNone(data)) {
      return withArtifact(fallback(schema, reason, burst.messages, "the finalize reply was not JSON"))
    }
    const validate = JsonSchemaCheck.compile(schema)
    if (!validate(data.value)) {
      const why = `the finalize reply did not match the report schema: ${JsonSchemaCheck.describe(validate.errors)}`
      return withArtifact(fallback(schema, reason, burst.messages, why))
    }
    return withArtifact({ exitReason: reason, source: "model", data: data.value })
  })

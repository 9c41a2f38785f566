/**
 * Context — what retrieval contributes to a run: the text of the `<context>` block of the first user turn, or the
 * reason there is none. A retrieval failure degrades the run, never ends it: an answer without grounding (and a
 * trajectory that says why) is worth more than no answer, so nothing here can fail.
 */
import { Cause, Effect, Option } from "effect"
import type { Principal } from "../domain/Principal.js"
import type { Chunk, Service } from "./Retriever.js"

/** What retrieval gave one run: the rendered chunks (none when nothing matched) and the failure, if any. */
export interface Retrieved {
  readonly context: Option.Option<string>
  readonly error: Option.Option<string>
}

/** The chunks as one readable block, best first: a numbered heading (title, source, document id), then the text. */
export const render = (chunks: ReadonlyArray<Chunk>): string =>
  chunks
    .map((chunk, i) =>
      `[${i + 1}] ${chunk.title} (source: ${chunk.source}, document: ${chunk.documentId})\n${chunk.text}`
    )
    .join("\n\n")

/**
 * Retrieves for `query` within `principal`'s org and `sources` and renders the result for the `<context>` block.
 * Never fails: a `RetrievalFailed` (or a defect of the retriever) becomes `error`, with `context` empty; only
 * interruption passes through.
 */
export const contextFor = (
  retriever: Service,
  query: string,
  principal: Principal,
  sources: ReadonlyArray<string>
): Effect.Effect<Retrieved> =>
  retriever.retrieve(query, principal, sources).pipe(
    Effect.map((chunks): Retrieved => ({
      context: chunks.length === 0 ? Option.none() : Option.some(render(chunks)),
      error: Option.none()
    })),
    Effect.catchAllCause((cause): Effect.Effect<Retrieved> => {
      if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
      const failure = Cause.failureOption(cause)
      const message = Option.isSome(failure)
        ? `retrieval failed: ${failure.value.message}`
        : `retrieval failed: ${Cause.pretty(cause).split("\n")[0] ?? "a defect in the retriever"}`
      return Effect.succeed({ context: Option.none(), error: Option.some(message) })
    }),
    Effect.withSpan("Context.contextFor")
  )

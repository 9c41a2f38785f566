/**
 * Retriever — the port through which an agent's run is grounded in documents its caller may read.
 *
 * The scope of a search is NOT the model's to choose: the caller's principal fixes the org, and the agent spec's
 * `knowledgeSources` fix the sources. Both arrive from the session, never from a tool call, so no prompt can widen
 * them; an empty source list retrieves nothing (a spec that names no sources asked for no knowledge). Every
 * implementation (SQL full-text, in-memory, none) keeps that same contract, tested by one suite.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { Buffer } from "node:buffer"
import type { Principal } from "../domain/Principal.js"

/** The largest document body accepted by `ingest`, in UTF-8 bytes (1 MB): a knowledge base, not a file store. */
export const maxBodyBytes = 1_000_000

/** How many chunks a retrieval returns when the caller does not say. */
export const defaultLimit = 5

/** The most chunks one retrieval may return, whatever the caller asks: the context block must stay small. */
export const maxLimit = 50

/** One retrieved passage: which document it came from, a bounded excerpt of it, and its rank (higher is better). */
export const Chunk = Schema.Struct({
  documentId: Schema.String,
  source: Schema.String,
  title: Schema.String,
  text: Schema.String,
  rank: Schema.Number
})
export type Chunk = typeof Chunk.Type

/** A document to ingest; its key is (the ingesting principal's org, `id`). */
export const Document = Schema.Struct({
  id: Schema.String,
  source: Schema.String,
  title: Schema.String,
  body: Schema.String
})
export type Document = typeof Document.Type

/** Options of one retrieval. */
export interface RetrieveOptions {
  /** Most chunks to return (default 5, clamped to 1..50). */
  readonly limit?: number
}

/** The knowledge store could not be searched or written (the store's own message is kept). */
export class RetrievalFailed extends Schema.TaggedError<RetrievalFailed>()("RetrievalFailed", {
  operation: Schema.Literal("retrieve", "ingest"),
  message: Schema.String
}) {}

/** A submitted document is invalid: `index` is its position in the batch and `field` the offending field. */
export class InvalidDocument extends Schema.TaggedError<InvalidDocument>()("InvalidDocument", {
  index: Schema.Int,
  field: Schema.Literal("id", "source", "title", "body"),
  message: Schema.String
}) {}

/** The operations every retriever offers. */
export interface Service {
  /**
   * The chunks of the documents of `principal`'s org whose source is one of `sources` that best match `query`, best
   * first. An empty `sources` or a blank query yields nothing. Fails with `RetrievalFailed` when the store fails.
   */
  readonly retrieve: (
    query: string,
    principal: Principal,
    sources: ReadonlyArray<string>,
    options?: RetrieveOptions
  ) => Effect.Effect<ReadonlyArray<Chunk>, RetrievalFailed>
  /**
   * Inserts or replaces (by org and id) every document, all or none. Fails with `InvalidDocument` for the first
   * invalid document (nothing is written) and `RetrievalFailed` when the store fails.
   */
  readonly ingest: (
    principal: Principal,
    documents: ReadonlyArray<Document>
  ) => Effect.Effect<void, RetrievalFailed | InvalidDocument>
}

/** The retriever of the running Corral. */
export class Retriever extends Context.Tag("corral/knowledge/Retriever")<Retriever, Service>() {}

const blank = (value: string) => value.trim().length === 0

/**
 * Checks a batch before any of it is written: non-empty `id`, `source` and `title`, a body of at most 1 MB.
 * Fails with `InvalidDocument` naming the first offending document's index and field.
 */
export const validate = (documents: ReadonlyArray<Document>): Effect.Effect<void, InvalidDocument> =>
  Effect.forEach(documents, (document, index) => {
    for (const field of ["id", "source", "title"] as const) {
      if (blank(document[field])) {
        return Effect.fail(
          new InvalidDocument({ index, field, message: `documents[${index}].${field} must not be empty` })
        )
      }
    }
    const bytes = Buffer.byteLength(document.body, "utf8")
    if (bytes > maxBodyBytes) {
      return Effect.fail(
        new InvalidDocument({
          index,
          field: "body",
          message: `documents[${index}].body is ${bytes} bytes; the most is ${maxBodyBytes}`
        })
      )
    }
    return Effect.void
  }, { discard: true })

/** The effective limit of a retrieval: the default when unset, clamped to 1..50 (a non-integer is floored). */
export const limitOf = (options?: RetrieveOptions): number => {
  const asked = options?.limit ?? defaultLimit
  return Number.isFinite(asked) ? Math.min(maxLimit, Math.max(1, Math.floor(asked))) : defaultLimit
}

/** A retriever that knows nothing: every retrieval is empty and ingestion is refused as `RetrievalFailed`. */
export const none: Service = {
  retrieve: () => Effect.succeed([]),
  ingest: () => Effect.fail(new RetrievalFailed({ operation: "ingest", message: "no knowledge store is configured" }))
}

/** Provides the `none` retriever: agents run ungrounded. Never fails. */
export const layerNone: Layer.Layer<Retriever> = Layer.succeed(Retriever, none)

/**
 * MemoryRetriever — a `Retriever` held in memory, for `Corral.layerMemory` and tests. Same contract as the SQL one
 * (org and source scoping, every query term required, title above body, upsert by org and id), with plain term
 * matching in place of Postgres's stemmer and `ts_rank`: good enough to ground a demo, not a search engine.
 */
import { Clock, Effect, Layer, Ref } from "effect"
import type { Principal } from "../domain/Principal.js"
import { excerpt, queryTerms, stem, words } from "./internal/text.js"
import type { Chunk, Document, RetrieveOptions, Service } from "./Retriever.js"
import { limitOf, Retriever, validate } from "./Retriever.js"

interface Stored extends Document {
  readonly orgId: string
  readonly updatedAt: number
}

// The weights ts_rank gives the title ('A', 1.0) and body ('B', 0.4) of the SQL tsvector.
const titleWeight = 1
const bodyWeight = 0.4

const counts = (text: string): ReadonlyMap<string, number> => {
  const found = new Map<string, number>()
  for (const word of words(text)) {
    const key = stem(word)
    found.set(key, (found.get(key) ?? 0) + 1)
  }
  return found
}

/** The rank of `document` for `terms`, or undefined when a term is missing from it (every term must match). */
const rank = (document: Document, terms: ReadonlyArray<string>): number | undefined => {
  const inTitle = counts(document.title)
  const inBody = counts(document.body)
  let score = 0
  for (const term of terms) {
    const hits = (inTitle.get(term) ?? 0) * titleWeight + (inBody.get(term) ?? 0) * bodyWeight
    if (hits === 0) return undefined
    score += hits
  }
  // Normalised by length like ts_rank's log normalisation would, so a long document does not win by volume alone.
  return score / Math.log2(2 + inBody.size)
}

const key = (orgId: string, id: string) => `${orgId}\u0000${id}`

/** An empty in-memory `Retriever`; never fails. */
export const make: Effect.Effect<Service> = Effect.gen(function*() {
  const store = yield* Ref.make<ReadonlyMap<string, Stored>>(new Map())

  const retrieve = (
    query: string,
    principal: Principal,
    sources: ReadonlyArray<string>,
    options?: RetrieveOptions
  ): Effect.Effect<ReadonlyArray<Chunk>> =>
    Effect.map(Ref.get(store), (documents) => {
      const terms = queryTerms(query)
      if (sources.length === 0 || terms.length === 0) return []
      const allowed = new Set(sources)
      const hits: Array<Chunk> = []
      for (const document of documents.values()) {
        if (document.orgId !== principal.orgId || !allowed.has(document.source)) continue
        const score = rank(document, terms)
        if (score === undefined) continue
        hits.push({
          documentId: document.id,
          source: document.source,
          title: document.title,
          text: excerpt(document.body, terms),
          rank: score
        })
      }
      hits.sort((a, b) => b.rank - a.rank || (a.documentId < b.documentId ? -1 : 1))
      return hits.slice(0, limitOf(options))
    })

  const ingest = (principal: Principal, documents: ReadonlyArray<Document>) =>
    Effect.gen(function*() {
      yield* validate(documents)
      const now = yield* Clock.currentTimeMillis
      yield* Ref.update(store, (current) => {
        const next = new Map(current)
        for (const { body, id, source, title } of documents) {
          next.set(key(principal.orgId, id), { orgId: principal.orgId, id, source, title, body, updatedAt: now })
        }
        return next
      })
    })

  return { retrieve, ingest }
})

/** Provides a fresh, empty in-memory `Retriever`; never fails. */
export const layer: Layer.Layer<Retriever> = Layer.effect(Retriever, make)

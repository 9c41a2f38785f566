import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import { Principal } from "../../src/domain/Principal.js"
import { contextFor, render } from "../../src/knowledge/Context.js"
import { RetrievalFailed, Retriever } from "../../src/knowledge/Retriever.js"
import * as RetrieverModule from "../../src/knowledge/Retriever.js"
import * as SqlRetriever from "../../src/knowledge/SqlRetriever.js"
import * as Embedded from "../../src/store/Embedded.js"
import * as Migrations from "../../src/store/Migrations.js"

const onEmbedded = () =>
  SqlRetriever.layer.pipe(
    Layer.provide(Layer.effectDiscard(Migrations.run).pipe(Layer.provideMerge(Embedded.layerEmbedded())))
  )

const principal = new Principal({ orgId: "org_a", userId: "u1" })

describe("Context: retrieval degrades, never fails", () => {
  it.live(
    "a closed embedded database fails retrieval with RetrievalFailed, and contextFor degrades to an error",
    () =>
      Effect.gen(function*() {
        // Build the retriever, then release its database: every later query meets a closed pool.
        const retriever = yield* Effect.scoped(Effect.map(Layer.build(onEmbedded()), Context.get(Retriever)))
        const error = yield* Effect.flip(retriever.retrieve("anything", principal, ["kb"]))
        expect(error).toBeInstanceOf(RetrievalFailed)
        expect(error.operation).toBe("retrieve")
        const ingest = yield* Effect.flip(
          retriever.ingest(principal, [{ id: "d", source: "kb", title: "t", body: "b" }])
        )
        expect(ingest._tag).toBe("RetrievalFailed")
        const degraded = yield* contextFor(retriever, "anything", principal, ["kb"])
        expect(degraded.context).toEqual(Option.none())
        expect(Option.getOrThrow(degraded.error)).toContain("retrieval failed")
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a database whose queries fail (no documents table) reports the database's message",
    () =>
      Effect.gen(function*() {
        const retriever = yield* SqlRetriever.make
        const error = yield* Effect.flip(retriever.retrieve("anything", principal, ["kb"]))
        expect(error.message).toContain("documents")
        const degraded = yield* contextFor(retriever, "anything", principal, ["kb"])
        expect(Option.getOrThrow(degraded.error)).toContain("documents")
        // Embedded.ts quirk, not the retriever's: when a failed parameterised statement is the last one before the
        // PGlite closes, node-postgres's trailing Sync reaches the closed database as an unhandled rejection. One
        // successful statement drains it.
        yield* (yield* SqlClient.SqlClient)`SELECT 1`
      }).pipe(Effect.provide(Embedded.layerEmbedded())),
    { timeout: 60_000 }
  )

  it.effect("contextFor never fails, even when the retriever dies", () =>
    Effect.gen(function*() {
      const failing: RetrieverModule.Service = {
        ...RetrieverModule.none,
        retrieve: () => Effect.fail(new RetrievalFailed({ operation: "retrieve", message: "index offline" }))
      }
      expect(yield* contextFor(failing, "q", principal, ["kb"])).toEqual({
        context: Option.none(),
        error: Option.some("retrieval failed: index offline")
      })
      const dying: RetrieverModule.Service = { ...RetrieverModule.none, retrieve: () => Effect.die(new Error("boom")) }
      const degraded = yield* contextFor(dying, "q", principal, ["kb"])
      expect(degraded.context).toEqual(Option.none())
      expect(Option.isSome(degraded.error)).toBe(true)
    }))

  it.effect("layerNone retrieves nothing and refuses ingestion", () =>
    Effect.gen(function*() {
      const retriever = yield* Retriever
      expect(yield* retriever.retrieve("anything", principal, ["kb"])).toEqual([])
      expect((yield* Effect.flip(retriever.ingest(principal, [])))._tag).toBe("RetrievalFailed")
    }).pipe(Effect.provide(RetrieverModule.layerNone)))
})

describe("Context.render", () => {
  it("numbers the chunks best first with title, source and document id", () => {
    expect(render([
      { documentId: "d1", source: "runbooks", title: "Disk full", text: "Free space.", rank: 0.9 },
      { documentId: "d2", source: "kb", title: "Disks", text: "Sizes.", rank: 0.1 }
    ])).toBe(
      "[1] Disk full (source: runbooks, document: d1)\nFree space.\n\n[2] Disks (source: kb, document: d2)\nSizes."
    )
  })
})

/**
 * The Retriever contract: one suite every implementation must pass (memory, SQL on embedded PGlite, SQL on
 * Postgres). The layer is built once per suite and shared by its tests, so each test works in its own orgs; live
 * services are used because a driver may do real I/O.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { Layer } from "effect"
import { randomUUID } from "node:crypto"
import { Principal } from "../../src/domain/Principal.js"
import { contextFor } from "../../src/knowledge/Context.js"
import { maxChunkChars } from "../../src/knowledge/internal/text.js"
import type { Document } from "../../src/knowledge/Retriever.js"
import { maxBodyBytes, Retriever } from "../../src/knowledge/Retriever.js"

const principal = (userId = "u1") => new Principal({ orgId: `org_${randomUUID().slice(0, 12)}`, userId })

const doc = (id: string, source: string, title: string, body: string): Document => ({ id, source, title, body })

/** Runs the contract against `retrieverLayer`, under `name`. */
export const retrieverContract = (name: string, retrieverLayer: Layer.Layer<Retriever, unknown>): void =>
  layer(retrieverLayer, { excludeTestServices: true })(`Retriever contract: ${name}`, (it) => {
    it.effect("never returns another org's documents, even with the same source, terms and ids", () =>
      Effect.gen(function*() {
        const retriever = yield* Retriever
        const a = principal()
        const b = principal()
        yield* retriever.ingest(a, [doc("d1", "runbooks", "Kafka broker restart", "Restart the kafka broker of A.")])
        yield* retriever.ingest(b, [
          doc("d1", "runbooks", "Kafka broker restart", "Restart the kafka broker of B."),
          doc("d2", "runbooks", "Kafka partitions", "Secret kafka partition map of B.")
        ])
        const forA = yield* retriever.retrieve("kafka", a, ["runbooks"])
        expect(forA.map((c) => [c.documentId, c.text])).toEqual([["d1", "Restart the kafka broker of A."]])
        const forB = yield* retriever.retrieve("kafka", b, ["runbooks"])
        expect(forB.map((c) => c.documentId).sort()).toEqual(["d1", "d2"])
        expect(forB.every((c) => c.text.includes("of B"))).toBe(true)
      }))

    it.effect("searches only the spec's sources: other sources never return, and no sources return nothing", () =>
      Effect.gen(function*() {
        const retriever = yield* Retriever
        const p = principal()
        yield* retriever.ingest(p, [
          doc("r1", "runbooks", "Disk full", "Free disk space on the database host."),
          doc("m1", "postmortems", "Disk full outage", "The database disk filled up in March."),
          doc("h1", "hr", "Salaries", "Disk of salaries: confidential.")
        ])
        const runbooks = yield* retriever.retrieve("disk", p, ["runbooks"])
        expect(runbooks.map((c) => c.documentId)).toEqual(["r1"])
        const both = yield* retriever.retrieve("disk", p, ["runbooks", "postmortems"])
        expect(both.map((c) => c.documentId).sort()).toEqual(["m1", "r1"])
        // Naming another source in the query does not widen the search: the sources come from the spec only.
        const sneaky = yield* retriever.retrieve("disk salaries hr", p, ["runbooks"])
        expect(sneaky.map((c) => c.source)).not.toContain("hr")
        expect(yield* retriever.retrieve("disk", p, [])).toEqual([])
        expect(yield* retriever.retrieve("disk", p, ["unknown"])).toEqual([])
      }))

    it.effect("puts the best match first and honours the limit (default 5)", () =>
      Effect.gen(function*() {
        const retriever = yield* Retriever
        const p = principal()
        const filler = "Routine notes about deployments, dashboards and on-call handovers. ".repeat(20)
        yield* retriever.ingest(p, [
          doc("weak", "kb", "Weekly report", `${filler} One consumer saw some lag once.`),
          doc(
            "best",
            "kb",
            "Consumer lag",
            "Consumer lag grows when a consumer is slow. Check consumer lag per partition; lag above 10k pages."
          ),
          ...Array.from({ length: 6 }, (_, i) =>
            doc(`more${i}`, "kb", `Note ${i}`, `${filler} A consumer had lag during test ${i}.`))
        ])
        const chunks = yield* retriever.retrieve("consumer lag", p, ["kb"])
        expect(chunks).toHaveLength(5)
        expect(chunks[0]?.documentId).toBe("best")
        const ranks = chunks.map((c) =>
          c.rank
        )
        expect([...ranks].sort((x, y) => y - x)).toEqual(ranks)
        expect(yield* retriever.retrieve("consumer lag", p, ["kb"], { limit: 2 })).toHaveLength(2)
        expect(yield* retriever.retrieve("consumer lag", p, ["kb"], { limit: 100 })).toHaveLength(8)
      }))

    it.effect("cuts long documents to a bounded chunk around the match", () =>
      Effect.gen(function*() {
        const retriever = yield* Retriever
        const p = principal()
        const body = `${"Unrelated preamble text. ".repeat(400)}The zookeeper quorum was lost. ${"Tail. ".repeat(300)}`
        yield* retriever.ingest(p, [doc("long", "kb", "Big document", body)])
        const [chunk] = yield* retriever.retrieve("zookeeper", p, ["kb"])
        expect(chunk?.text.length).toBeLessThanOrEqual(maxChunkChars)
        expect(chunk?.text).toContain("The zookeeper quorum was lost.")
      }))

    it.effect("upserts by org and id: a re-ingested document replaces the old one", () =>
      Effect.gen(function*() {
        const retriever = yield* Retriever
        const p = principal()
        yield* retriever.ingest(p, [doc("d1", "kb", "Alpha guide", "Everything about alpha.")])
        yield* retriever.ingest(p, [doc("d1", "kb", "Bravo guide", "Everything about bravo.")])
        expect(yield* retriever.retrieve("alpha", p, ["kb"])).toEqual([])
        const chunks = yield* retriever.retrieve("bravo", p, ["kb"])
        expect(chunks.map((c) => [c.documentId, c.title])).toEqual([["d1", "Bravo guide"]])
        // The same id twice in one batch: the later one wins.
        yield* retriever.ingest(p, [doc("d2", "kb", "One", "charlie one"), doc("d2", "kb", "Two", "charlie two")])
        expect((yield* retriever.retrieve("charlie", p, ["kb"])).map((c) => c.title)).toEqual(["Two"])
      }))

    it.effect("refuses invalid documents naming the index and the field, and writes none of the batch", () =>
      Effect.gen(function*() {
        const retriever = yield* Retriever
        const p = principal()
        const good = doc("ok", "kb", "Valid", "delta valid")
        const cases = [
          [doc(" ", "kb", "t", "b"), "id"],
          [doc("x", "", "t", "b"), "source"],
          [doc("x", "kb", "", "b"), "title"],
          [doc("x", "kb", "t", "é".repeat(maxBodyBytes / 2 + 1)), "body"]
        ] as const
        for (const [bad, field] of cases) {
          const error = yield* Effect.flip(retriever.ingest(p, [good, bad]))
          expect(error).toMatchObject({ _tag: "InvalidDocument", index: 1, field })
          expect(error.message).toContain(`documents[1].${field}`)
        }
        expect(yield* retriever.retrieve("delta", p, ["kb"])).toEqual([])
      }))

    it.effect("renders the chunks for the context block, and no context when nothing matches", () =>
      Effect.gen(function*() {
        const retriever = yield* Retriever
        const p = principal()
        yield* retriever.ingest(p, [doc("d1", "runbooks", "Echo procedure", "Run the echo check twice.")])
        const found = yield* contextFor(retriever, "echo", p, ["runbooks"])
        expect(found.error).toEqual(Option.none())
        const text = Option.getOrThrow(found.context)
        expect(text).toContain("Echo procedure")
        expect(text).toContain("source: runbooks")
        expect(text).toContain("Run the echo check twice.")
        expect(yield* contextFor(retriever, "foxtrot", p, ["runbooks"])).toEqual({
          context: Option.none(),
          error: Option.none()
        })
      }))
  })

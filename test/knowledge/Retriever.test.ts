import { Layer } from "effect"
import * as MemoryRetriever from "../../src/knowledge/MemoryRetriever.js"
import * as SqlRetriever from "../../src/knowledge/SqlRetriever.js"
import * as Embedded from "../../src/store/Embedded.js"
import * as Migrations from "../../src/store/Migrations.js"
import { retrieverContract } from "./RetrieverContract.js"

/** The SQL retriever on a fresh in-memory PGlite, migrated. */
const onEmbedded = () =>
  SqlRetriever.layer.pipe(
    Layer.provide(Layer.effectDiscard(Migrations.run).pipe(Layer.provideMerge(Embedded.layerEmbedded())))
  )

retrieverContract("memory", MemoryRetriever.layer)
retrieverContract("sql on embedded PGlite", onEmbedded())

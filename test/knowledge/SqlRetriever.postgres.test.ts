import { describe } from "@effect/vitest"
import { Layer } from "effect"
import * as SqlRetriever from "../../src/knowledge/SqlRetriever.js"
import * as Migrations from "../../src/store/Migrations.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { retrieverContract } from "./RetrieverContract.js"

const url = testDatabaseUrl ?? "postgres://unused"

describe.skipIf(testDatabaseUrl === undefined)(
  `Retriever on Postgres (${testDatabaseUrl === undefined ? skipReason : "fresh database"})`,
  () => {
    retrieverContract(
      "sql on Postgres",
      SqlRetriever.layer.pipe(
        Layer.provide(Layer.effectDiscard(Migrations.run).pipe(Layer.provideMerge(freshDatabase(url))))
      )
    )
  }
)

/**
 * `corral/sql` as Node loads it from the package: src/sql.ts behind `load`, so that a program without @effect/sql
 * or @effect/sql-pg (optional peers) is told which packages this entry needs and the line that installs them. The
 * types are src/sql.ts's (package.json `exports`); test/entries/OptionalPeers.test.ts keeps the names equal.
 */
import { load } from "../internal/optionalPeers.js"

const entry = await load("corral/sql", () => import("../sql.js"))

export const { Database, Embedded, isSchemaName, layerDatabase, layerSql, migrate, SqlStore } = entry

import { PGlite } from "@electric-sql/pglite"
let t = Date.now()
const db = await PGlite.create("memory://")
console.log("create", Date.now() - t); t = Date.now()
await db.query("select 1"); console.log("q", Date.now() - t); t = Date.now()
const db2 = await PGlite.create("memory://")
console.log("create2", Date.now() - t); t = Date.now()
const dump = await db.dumpDataDir("none"); console.log("dump", Date.now() - t, dump.size); t = Date.now()
const db3 = await PGlite.create({ loadDataDir: dump }); console.log("load", Date.now() - t)

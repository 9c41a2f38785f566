// The README's entries table (its "Install" section) as the package ships it: entry → its `npm install …` line.
// Run as a script it prints `entry<TAB>line` per row that has a line, in the table's order (pack-check.sh installs
// them one by one); imported, `readmeInstalls()` returns the map.
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

export const readmeInstalls = (path = "node_modules/corral/README.md") => {
  const rows = new Map()
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const match = /^\| `(corral[^`]*)`(?: with `([^`]+)`)? \|[^|]*\| .*?`(npm install [^`]+)`/.exec(line)
    if (match !== null) rows.set(match[2] === undefined ? match[1] : `${match[1]} with ${match[2]}`, match[3])
  }
  return rows
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const [entry, line] of readmeInstalls()) console.log(`${entry}\t${line}`)
}

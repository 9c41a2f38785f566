/**
 * A local OTLP/HTTP sink for the telemetry cost measurement: accepts `POST /v1/traces` and `/v1/metrics` (JSON),
 * answers `{}` like a collector as soon as a body has arrived, then counts its spans, and prints how many requests and bytes it took on
 * exit. Run: `node --import tsx scripts/bench/otlp-sink.ts [port]` (default 4318), then pass
 * `--otlp http://127.0.0.1:4318` to `scripts/bench/run.ts`.
 */
import { createServer } from "node:http"

const port = Number(process.argv[2] ?? 4318)
let requests = 0
let bytes = 0
const names = new Map<string, number>()
const server = createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => {
    bytes += chunk.length
    chunks.push(chunk)
  })
  request.on("end", () => {
    requests++
    // Answered first, counted after: the sender's flush waits for the answer, and what is measured is the sender's
    // cost, not this sink's JSON parse (a collector elsewhere parses on its own cores).
    response.writeHead(200, { "content-type": "application/json" }).end("{}")
    if (request.url === "/v1/traces") {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        for (const rs of body.resourceSpans ?? []) {
          for (const ss of rs.scopeSpans ?? []) {
            for (const span of ss.spans ?? []) {
              const name = String(span.name).split(" ")[0]!
              names.set(name, (names.get(name) ?? 0) + 1)
            }
          }
        }
      } catch {
        // not JSON: counted in bytes only
      }
    }
  })
})
server.listen(port, "127.0.0.1", () => process.stdout.write(`otlp sink on http://127.0.0.1:${port}\n`))
const stop = () => {
  process.stdout.write(`otlp sink: ${requests} requests, ${bytes} bytes, spans by name ${JSON.stringify([...names])}\n`)
  server.close()
  process.exit(0)
}
process.once("SIGTERM", stop)
process.once("SIGINT", stop)

/**
 * End to end: `corral serve` (a child process) with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a test-owned
 * OTLP/HTTP receiver. One session over two real HTTP providers (the first answers 500 until its attempts are spent,
 * the session fails over) reaches the receiver as one span tree, with its metrics; `GET /metrics` moves; the logs
 * are JSON lines and never contain a provider key.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Fake from "../support/FakeProvider.js"
import * as OtlpReceiver from "../support/OtlpReceiver.js"
import { parsePrometheus } from "../support/PrometheusText.js"
import { corral, eventually, raw } from "../support/ServerHarness.js"

const PRIMARY_KEY = "sk-e2e-primary-5f1c9a77d3b04e2c"
const SECONDARY_KEY = "sk-ant-e2e-secondary-8b2d4e6f0a1c"

const serverError = Fake.status(500, { error: { message: "upstream exploded", type: "server_error" } }, {
  "retry-after-ms": "5"
})

it.scopedLive(
  "corral serve exports one session's span tree and metrics over OTLP/HTTP, and /metrics moves",
  () =>
    Effect.gen(function*() {
      const receiver = yield* OtlpReceiver.make
      const primary = yield* Fake.make({ fallback: () => serverError })
      const secondary = yield* Fake.make()
      const dir = mkdtempSync(join(tmpdir(), "corral-otel-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const child = corral(["serve", "--port", "0", "--memory"], {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_HEADERS: "x-collector-token=e2e%20token",
        OTEL_SERVICE_NAME: "corral-e2e",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test",
        OTEL_METRIC_EXPORT_INTERVAL: "500",
        E2E_PRIMARY_KEY: PRIMARY_KEY,
        E2E_SECONDARY_KEY: SECONDARY_KEY,
        CORRAL_PROVIDERS: JSON.stringify({
          primary: {
            api: "openai",
            baseUrl: primary.openAiBaseUrl,
            apiKeyEnv: "E2E_PRIMARY_KEY",
            model: "gpt-e2e",
            maxAttempts: 2
          },
          secondary: {
            api: "anthropic",
            baseUrl: secondary.anthropicBaseUrl,
            apiKeyEnv: "E2E_SECONDARY_KEY",
            model: "claude-e2e"
          }
        }),
        CORRAL_TIERS: JSON.stringify({ default: ["primary", "secondary"] })
      }, dir)
      yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
      const url = yield* eventually(
        "the server to listen",
        Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
        "90 seconds"
      )
      const series = "corral_bursts_total{corral_exit_reason=\"completed\",corral_tier=\"default\"}"
      const before = parsePrometheus((yield* raw(`${url}/metrics`)).text).get(series) ?? 0
      expect(before).toBe(0)

      const published = yield* raw(`${url}/v1/agents`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          id: "triage",
          version: 1,
          name: "Triage",
          description: "Finds the cause.",
          instructions: "Find the cause of the incident.",
          tools: ["demo_status"]
        })
      })
      expect(published.status, published.text).toBe(201)
      const started = yield* raw(`${url}/v1/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ agentId: "triage", scope: "incident:1", prompt: "Why is checkout failing?" })
      })
      expect(started.status, started.text).toBe(202)
      const id = JSON.parse(started.text).sessionId as string
      const view = yield* eventually(
        "the session to land",
        Effect.map(raw(`${url}/v1/sessions/${id}`), (r) => {
          const body = JSON.parse(r.text)
          return body.exitReason === undefined || body.status === "running" ? undefined : body
        }),
        "60 seconds"
      )
      expect(view.exitReason).toBe("completed")

      // /metrics: Prometheus text that moved with the session.
      const scraped = yield* raw(`${url}/metrics`)
      expect(scraped.contentType).toContain("text/plain; version=0.0.4")
      const samples = parsePrometheus(scraped.text)
      expect(samples.get(series)).toBe(1)
      expect(
        samples.get(
          "corral_model_call_failovers_total{error_type=\"server\",corral_provider=\"primary\"}"
        )
      ).toBe(1)

      // SIGTERM: the layer closes and flushes what is left to the collector.
      child.process.kill("SIGTERM")
      expect(yield* Effect.promise(() => child.exited)).toBe(0)

      const spans = receiver.spans()
      const burst = spans.find((s) => s.name === "invoke_agent Triage")
      expect(burst, spans.map((s) => s.name).join(", ")).toBeDefined()
      // The HTTP server's own span per request is made when telemetry is on (off, the server skips it).
      expect(spans.some((s) => s.name === "http.server POST" && s.attributes["url.path"] === "/v1/sessions")).toBe(
        true
      )
      expect(burst!.resource).toMatchObject({ "service.name": "corral-e2e", "deployment.environment": "test" })
      expect(burst!.attributes).toMatchObject({
        "gen_ai.conversation.id": id,
        "corral.exit.reason": "completed"
      })
      const inBurst = spans.filter((s) => s.traceId === burst!.traceId)
      const chats = inBurst.filter((s) => s.name === "chat gpt-e2e" && s.parentSpanId === burst!.spanId)
      expect(chats).toHaveLength(1)
      expect(chats[0]!.attributes).toMatchObject({
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-e2e",
        "corral.attempts": 3,
        "corral.retries": 1,
        "corral.failovers": 1
      })
      const attempts = inBurst.filter((s) => s.parentSpanId === chats[0]!.spanId)
      expect(attempts.map((s) => [s.name, s.attributes["gen_ai.provider.name"], s.attributes["error.type"]])).toEqual([
        ["chat.attempt gpt-e2e", "openai", "server"],
        ["chat.attempt gpt-e2e", "openai", "server"],
        ["chat.attempt claude-e2e", "anthropic", undefined]
      ])
      // The HTTP client's own request span nests under the attempt that sent it.
      for (const attempt of attempts) {
        expect(inBurst.filter((s) => s.parentSpanId === attempt.spanId).map((s) => s.name)).toEqual([
          "http.client POST"
        ])
      }
      expect(inBurst.some((s) => s.name === "execute_tool demo_status" && s.parentSpanId === burst!.spanId)).toBe(true)
      expect(burst!.events.map((e) => e.name)).toEqual([
        "corral.rail.retry",
        "corral.rail.failover",
        "corral.rail.exit"
      ])
      // The headers went with every export.
      expect(receiver.requests().every((r) => r.headers["x-collector-token"] === "e2e token")).toBe(true)

      // Metrics reached the collector too, under their OpenTelemetry names.
      const names = new Set(receiver.metrics().map((m) => m.name))
      expect(names).toContain("gen_ai.client.operation.duration")
      expect(names).toContain("corral.bursts")
      expect(names).toContain("corral.tool_call.duration")

      // Logs: JSON lines (stdout is not a terminal), and no provider key anywhere in the process's output.
      const output = child.stdout() + child.stderr()
      const lines = child.stdout().split("\n").filter((l) => l.trim() !== "")
      expect(lines.length).toBeGreaterThan(0)
      for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow()
      expect(output).not.toContain(PRIMARY_KEY)
      expect(output).not.toContain(SECONDARY_KEY)
      expect(output).not.toContain("e2e token")
    }),
  120_000
)

/**
 * Metrics as an operator reads them: through Effect's Metric API (what the OTLP exporter sends) and as Prometheus
 * text (what `/metrics` serves), moving when a session runs, with telemetry export off (metrics do not need it).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import { Scope } from "../../src/domain/Scope.js"
import { initialState } from "../../src/domain/Session.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Embedded from "../../src/store/Embedded.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import * as Metrics from "../../src/telemetry/Metrics.js"
import * as Prometheus from "../../src/telemetry/Prometheus.js"
import * as Harness from "../../src/testing/Harness.js"
import { parsePrometheus } from "../support/PrometheusText.js"
import * as Tools from "../support/tools.js"

const counter = (metric: Metric.Metric.Counter<number>, ...pairs: ReadonlyArray<string>) =>
  Effect.map(Metric.value(Metric.taggedWithLabels(metric, Metrics.labels(...pairs))), (s) => s.count)

const histogram = (metric: Metric.Metric.Histogram<number>, ...pairs: ReadonlyArray<string>) =>
  Metric.value(Metric.taggedWithLabels(metric, Metrics.labels(...pairs)))

const flaky = () =>
  Scripted.make({
    name: "flaky",
    model: "m-flaky",
    script: [
      Scripted.fault("rate_limit", { usage: { input: 3 } }),
      Scripted.toolCalls([{ name: "echo", arguments: { q: "x" } }]),
      Scripted.text("done", { input: 7, output: 2 })
    ]
  })

describe("metrics", () => {
  it.effect("a session moves the burst, model-call, retry, token and tool metrics", () =>
    Effect.gen(function*() {
      const before = {
        bursts: yield* counter(Metrics.bursts, "corral.exit_reason", "completed", "corral.tier", "default"),
        retries: yield* counter(Metrics.retries, "error.type", "rate_limit", "corral.provider", "flaky"),
        tokens: yield* counter(
          Metrics.tokens,
          "corral.provider",
          "flaky",
          "gen_ai.request.model",
          "m-flaky",
          "corral.org_id",
          Harness.principal.orgId,
          "gen_ai.token.type",
          "output"
        ),
        calls: (yield* histogram(
          Metrics.operationDuration,
          "gen_ai.operation.name",
          "chat",
          "gen_ai.provider.name",
          "_OTHER",
          "gen_ai.request.model",
          "m-flaky",
          "error.type",
          "none"
        )).count,
        appends: (yield* Metric.value(Metrics.storeAppend)).count,
        tools: (yield* histogram(
          Metrics.toolDuration,
          "gen_ai.tool.name",
          "echo",
          "corral.tool.server",
          "core",
          "error.type",
          "none"
        )).count
      }
      const landed = yield* Harness.drive(Harness.runBurst({ spec: Harness.agent({ tools: ["echo"] }) })).pipe(
        Effect.provide(Harness.layer({ providers: [flaky()], tools: Tools.all }))
      )
      expect(landed.reason).toBe("completed")
      expect(yield* counter(Metrics.bursts, "corral.exit_reason", "completed", "corral.tier", "default"))
        .toBe(before.bursts + 1)
      expect(yield* counter(Metrics.retries, "error.type", "rate_limit", "corral.provider", "flaky"))
        .toBe(before.retries + 1)
      // Every output token the burst spent, under its provider, model and org.
      const outputTokens = landed.trajectory.usage.outputTokens
      expect(outputTokens).toBeGreaterThan(0)
      expect(
        yield* counter(
          Metrics.tokens,
          "corral.provider",
          "flaky",
          "gen_ai.request.model",
          "m-flaky",
          "corral.org_id",
          Harness.principal.orgId,
          "gen_ai.token.type",
          "output"
        )
      ).toBe(before.tokens + outputTokens)
      // Three logical calls (the retried one, the answer, the finalize), each one duration sample.
      const calls = yield* histogram(
        Metrics.operationDuration,
        "gen_ai.operation.name",
        "chat",
        "gen_ai.provider.name",
        "_OTHER",
        "gen_ai.request.model",
        "m-flaky",
        "error.type",
        "none"
      )
      expect(calls.count).toBe(before.calls + 3)
      const tools = yield* histogram(
        Metrics.toolDuration,
        "gen_ai.tool.name",
        "echo",
        "corral.tool.server",
        "core",
        "error.type",
        "none"
      )
      expect(tools.count).toBe(before.tools + 1)
      // Every persisted turn of the burst was one timed append.
      expect((yield* Metric.value(Metrics.storeAppend)).count - before.appends).toBe(landed.turns.length)
      expect(yield* Metric.value(Metrics.burstsActive)).toEqual(expect.objectContaining({ count: 0 }))
    }))

  it.effect("Prometheus text parses and moves when a session runs", () =>
    Effect.gen(function*() {
      const series = "corral_bursts_total{corral_exit_reason=\"completed\",corral_tier=\"default\"}"
      const before = parsePrometheus(Prometheus.render()).get(series) ?? 0
      yield* Harness.drive(Harness.runBurst({ spec: Harness.agent() })).pipe(
        Effect.provide(Harness.layer({ providers: [Scripted.make({ script: [Scripted.text("ok")] })] }))
      )
      const text = Prometheus.render()
      const samples = parsePrometheus(text)
      expect(samples.get(series)).toBe(before + 1)
      expect(text).toContain("# TYPE gen_ai_client_operation_duration_seconds histogram")
      expect(text).toContain("# TYPE corral_bursts_active gauge")
      // Histogram buckets are cumulative and end at +Inf with the count.
      const buckets = [...samples.entries()].filter(([k]) =>
        k.startsWith("gen_ai_client_operation_duration_seconds_bucket{") && k.includes("m-flaky") === false &&
        k.includes("scripted-model")
      )
      expect(buckets.length).toBeGreaterThan(1)
      const values = buckets.map(([, v]) => v)
      expect(values).toEqual([...values].sort((a, b) => a - b))
      expect(buckets[buckets.length - 1]![0]).toContain("le=\"+Inf\"")
    }))

  it("labels: the same pairs give the same array, other pairs (however they would join) another", () => {
    const a = Metrics.labels("error.type", "rate_limit", "corral.provider", "alpha")
    expect(Metrics.labels("error.type", "rate_limit", "corral.provider", "alpha")).toBe(a)
    expect(a.map((l) => [l.key, l.value])).toEqual([["error.type", "rate_limit"], ["corral.provider", "alpha"]])
    expect(Metrics.labels("error.type", "rate_limit", "corral.provider", "beta")).not.toBe(a)
    expect(Metrics.labels("k", "a\u0000b").map((l) => l.value)).toEqual(["a\u0000b"])
    expect(Metrics.labels("k\u0000a", "b").map((l) => l.key)).toEqual(["k\u0000a"])
    expect(Metrics.labels()).toEqual([])
  })

  it("escapes label values and stays parseable", () => {
    const metric = Metric.counter("test.escape", { incremental: true })
    metric.unsafeUpdate(2, Metrics.labels("path", "a\"b\\c\nd"))
    const rendered = Prometheus.render()
    expect(rendered).toContain("test_escape_total{path=\"a\\\"b\\\\c\\nd\"} 2")
    expect(() => parsePrometheus(rendered)).not.toThrow()
  })

  it.live(
    "the SQL store's group commit reports how many turns each append statement wrote",
    () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const before = yield* Metric.value(Metrics.storeAppendBatch)
        const sessions = Array.from({ length: 20 }, (_, i) => ({
          id: SessionId.make(`ses_batch_${i}`),
          principal: Harness.principal,
          scope: Scope.make("incident:batch"),
          agentId: AgentId.make("triage"),
          agentVersion: 1,
          createdAt: 1,
          updatedAt: 1,
          state: initialState
        }))
        yield* Effect.forEach(sessions, (session) => store.createSession(session), { discard: true })
        // 20 sessions append at once: the group commit writes them in fewer statements than turns.
        yield* Effect.forEach(
          sessions,
          (session) => store.appendTurn(session.id, { kind: "user", text: "hello" }, 2),
          { concurrency: "unbounded", discard: true }
        )
        const after = yield* Metric.value(Metrics.storeAppendBatch)
        expect(after.sum - before.sum).toBe(20)
        expect(after.count - before.count).toBeGreaterThan(0)
        expect(after.count - before.count).toBeLessThan(20)
        expect(after.max).toBeGreaterThan(1)
        // And on /metrics, as a histogram in turns.
        const samples = parsePrometheus(Prometheus.render())
        expect(samples.get("corral_store_append_batch_size_sum")).toBe(after.sum)
      }).pipe(Effect.provide(SqlStore.layer({ lanes: 1 }).pipe(Layer.provideMerge(Embedded.layerEmbedded())))),
    120_000
  )
})

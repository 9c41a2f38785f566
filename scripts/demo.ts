/**
 * `npm run demo` — scripted investigations, no API key, no network.
 *
 * Each scenario runs one agent against a scripted model through the real runtime (actor, loop, rails, landing) and
 * prints the transcript as it happens, then the landed report. Together they show the rails at work: retry and
 * failover after 429s, truncation of a huge tool result, the repeat guard, bad-tool strikes, a write waiting for a
 * person's approval, and the per-burst ceiling. `npm run demo -- --http` runs against a model over real HTTP instead.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Console, Effect, Fiber, Stream } from "effect"
import * as Printer from "../src/cli/Printer.js"
import { Corral } from "../src/Corral.js"
import { Principal } from "../src/domain/Principal.js"
import * as Anthropic from "../src/model/Anthropic.js"
import type { ModelProvider } from "../src/model/ModelProvider.js"
import * as OpenAiCompat from "../src/model/OpenAiCompat.js"
import * as Scripted from "../src/model/Scripted.js"
import * as Tools from "../src/testing/DemoTools.js"
import * as FakeProvider from "../test/support/FakeProvider.js"

const me = new Principal({ orgId: "demo", userId: "you" })

interface Scenario {
  readonly title: string
  readonly rails: string
  readonly providers: ReadonlyArray<ModelProvider>
  readonly prompt: string
  readonly limits?: Record<string, number>
  /** What a person does after the burst lands (e.g. approve a pending write). */
  readonly then?: (c: Corral["Type"], sessionId: string) => Effect.Effect<unknown, unknown>
}

const call = (name: string, args: object) => Scripted.toolCalls([{ name, arguments: args }])

/** What the scripted model writes when asked for the report at landing. */
const report = (summary: string, nextSteps: ReadonlyArray<string>) => () =>
  Scripted.text(JSON.stringify({ summary, findings: [], confidence: "low", nextSteps }))

const scenarios: ReadonlyArray<Scenario> = [
  {
    title: "Checkout errors, primary provider throttled",
    rails: "Retry (Retry-After honoured), ProviderChain (sticky failover), Truncate",
    providers: [
      Scripted.make({
        name: "primary",
        maxAttempts: 2,
        script: [
          Scripted.fault("rate_limit", { retryAfterMs: 300, message: "429 Too Many Requests" }),
          Scripted.fault("rate_limit", { retryAfterMs: 300, message: "429 Too Many Requests" })
        ]
      }),
      Scripted.make({
        name: "fallback",
        script: [
          call("logs", { service: "checkout" }),
          Scripted.text("Checkout fails because its database pool is exhausted (see the tail of the logs).")
        ],
        report: () =>
          Scripted.text(JSON.stringify({
            summary: "Checkout's database connection pool is exhausted.",
            findings: ["checkout logs end with 'pool exhausted: 50/50 connections busy'"],
            confidence: "medium",
            nextSteps: ["Raise the pool size or find the connection leak."]
          }))
      })
    ],
    prompt: "Why are checkout requests failing since 09:00?"
  },
  {
    title: "A model that keeps asking the same thing",
    rails: "RepeatGuard (warning at 2, halt at 4)",
    providers: [
      Scripted.make({
        script: Array(6).fill(call("status", { service: "payments" })),
        report: report("Payments reports unhealthy (error rate 12.5%); repeated checks added nothing.", [
          "Look at the payments error logs instead of polling its status."
        ])
      })
    ],
    prompt: "Is the payments service healthy?"
  },
  {
    title: "A model that cannot use its tools",
    rails: "Strikes (unknown tool, invalid JSON, schema-invalid arguments → bad_tool_use)",
    providers: [
      Scripted.make({
        script: [
          call("grep_logs", { pattern: "error" }),
          Scripted.toolCalls([{ name: "logs", arguments: "{\"service\": checkout" }]),
          call("logs", { svc: "checkout" })
        ],
        report: report("No evidence gathered: every tool call was malformed.", ["Check the agent's tool instructions."])
      })
    ],
    prompt: "Find the first error in checkout's logs."
  },
  {
    title: "A fix that needs a person",
    rails: "Approvals (a write waits; reads of the same turn still run), then the approved call runs first",
    providers: [
      Scripted.make({
        script: [
          Scripted.toolCalls([
            { name: "restart", arguments: { service: "checkout" } },
            { name: "status", arguments: { service: "checkout" } }
          ]),
          Scripted.text("Checkout was restarted and reports healthy again.")
        ],
        report: report("Checkout was wedged; a person approved a restart, after which it reported healthy.", [
          "Watch checkout's error rate for the next hour."
        ])
      })
    ],
    prompt: "Checkout is wedged. Fix it.",
    then: (c, sessionId) =>
      Effect.gen(function*() {
        // The session was started in the background: its tokens were never shown, so ask for fresh ones.
        const view = yield* c.renewApprovals(me, sessionId)
        for (const pending of view.pending) {
          yield* Console.log(`\n  >> a person approves ${pending.tool}(${pending.arguments})\n`)
          yield* c.approve(me, sessionId, pending.token ?? "", "approve")
        }
      })
  },
  {
    title: "An investigation that will not converge",
    rails: "Counters (per-burst ceiling, tightened to 4 by the agent's limits)",
    providers: [
      Scripted.make({
        script: ["a", "b", "c", "d", "e", "f"].map((host) => call("status", { service: `host-${host}` }))
      })
    ],
    prompt: "Check every host.",
    limits: { modelCallsPerBurst: 4 }
  }
]

/** Prints the session's events from `fromSeq` until the next report lands. */
const follow = (c: Corral["Type"], sessionId: string, fromSeq: number) =>
  c.events(me, sessionId, fromSeq).pipe(
    Stream.takeUntil((e) => e._tag === "report"),
    Stream.runForEach((e) => Effect.forEach(Printer.lines(e), (l) => Console.log(l), { discard: true }))
  )

/** Prints what the trajectories say about model attempts: retries, waits and failovers happen out of the transcript. */
const attempts = (c: Corral["Type"], sessionId: string) =>
  Effect.gen(function*() {
    const all = (yield* c.trajectories(me, sessionId)).flatMap((t) => t.modelCalls)
    const lines = all.map((a) =>
      `      ${a.provider} attempt ${a.attempt}: ${
        a.error
          ? `${a.error.kind}${a.error.retryAfterMs === undefined ? "" : ` (Retry-After ${a.error.retryAfterMs} ms)`}`
          : "ok"
      }`
    )
    yield* Console.log(`    model attempts (from the trajectory):\n${lines.join("\n")}`)
  })

const runScenario = (scenario: Scenario, index: number) =>
  Effect.gen(function*() {
    const c = yield* Corral
    yield* Console.log(`\n━━ ${index + 1}. ${scenario.title}\n   rails: ${scenario.rails}\n`)
    yield* c.publishAgent(me, {
      id: "demo",
      version: 1,
      name: "Demo investigator",
      instructions: "You investigate production incidents. Use the tools, then answer with the cause.",
      tools: Tools.all.map((t) => t.name),
      ...(scenario.limits ? { limits: scenario.limits } : {})
    })
    const started = yield* c.start(me, {
      agentId: "demo",
      scope: `incident:DEMO-${index + 1}`,
      prompt: scenario.prompt
    })
    yield* follow(c, started.id, 0)
    if (scenario.then) {
      // Subscribe before acting, so the resumed burst's turns are all printed.
      const from = (yield* c.turns(me, started.id)).length
      const printing = yield* Effect.fork(follow(c, started.id, from))
      yield* scenario.then(c, started.id)
      yield* Fiber.join(printing)
    }
    yield* attempts(c, started.id)
  }).pipe(Effect.provide(Corral.layerMemory({ providers: scenario.providers, tools: Tools.all })))

/**
 * `--http`: the same runtime against a model over real HTTP — the fake provider (both wire formats) started in this
 * process. The OpenAI-compatible endpoint answers the first call with a 429 and `Retry-After: 1`; the chain waits
 * exactly that long, then the conversation streams in.
 */
const overHttp = Effect.gen(function*() {
  const fake = yield* FakeProvider.make({ script: [FakeProvider.rateLimited({ seconds: 1 })] })
  yield* Console.log(`fake provider on ${fake.url} (OpenAI-compatible and Anthropic wire formats)`)
  const openai = yield* OpenAiCompat.make({
    name: "openai-compatible",
    model: "fake-model",
    baseUrl: fake.openAiBaseUrl
  })
  const claude = yield* Anthropic.make({ name: "anthropic", model: "fake-claude", baseUrl: fake.anthropicBaseUrl })
  yield* runScenario({
    title: "Over real HTTP: a throttled OpenAI-compatible endpoint, Anthropic as fallback",
    rails: "Retry (Retry-After: 1 honoured over HTTP), streaming, the model's report",
    providers: [openai, claude],
    prompt: "Why are checkout requests failing since 09:00?"
  }, 0)
  yield* Console.log(`the fake provider received ${fake.requests.length} requests`)
}).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici))

const program = (process.argv.includes("--http") ? overHttp : Effect.forEach(scenarios, runScenario, { discard: true }))
  .pipe(Effect.zipRight(Console.log("\nDone: every burst ended with exactly one exit reason and landed a report.")))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exit(1)
})

/**
 * `corral run` — one session in this process, streamed to the terminal: publish the agent (or use the built-in
 * demo agent), start the session, print each event as it happens (turns, tool calls as they start, rail notices,
 * the exit reason) and the landed report. The exit code says how the burst ended, for scripts: 0 `completed`,
 * 2 any other exit reason (including Ctrl-C, which cancels the burst and still prints its report), 1 an error —
 * among them a provider of the agent's route whose `apiKeyEnv` names an unset variable (unless its `baseUrl` is a
 * loopback address), refused before the session starts.
 */
import { Effect, Either, Option, Stream } from "effect"
import { readFile } from "node:fs/promises"
import { Corral } from "../Corral.js"
import type { AgentSpecInput } from "../domain/AgentSpec.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { Principal } from "../domain/Principal.js"
import type { SessionEvent } from "../domain/SessionEvent.js"
import * as ProviderConfig from "../model/ProviderConfig.js"
import * as DemoAgent from "../server/DemoAgent.js"
import * as Wiring from "../server/Wiring.js"
import type * as Args from "./Args.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"
import * as Printer from "./Printer.js"

/** Reads and parses a JSON file; fails with a message naming the file. */
export const readJson = (path: string): Effect.Effect<unknown, string> =>
  Effect.tryPromise({ try: () => readFile(path, "utf8"), catch: (e) => `cannot read ${path}: ${String(e)}` }).pipe(
    Effect.flatMap((text) =>
      Effect.try({ try: (): unknown => JSON.parse(text), catch: (e) => `${path} is not valid JSON: ${String(e)}` })
    )
  )

const printEvent = (event: SessionEvent) => Output.lines(Printer.lines(event))

/** Follows the session from `fromSeq` until its burst's report lands; returns the exit reason seen (if any). */
const follow = (by: Principal, sessionId: string, fromSeq: number, onSeq: (seq: number) => void) =>
  Effect.flatMap(Corral, (corral) => {
    let reason: ExitReason | undefined
    // Ends when the burst lands, replaying its exit and report if it landed before the subscription (after a cancel).
    return corral.events(by, sessionId, { fromSeq, until: "landed" }).pipe(
      Stream.runForEach((event) =>
        Effect.suspend(() => {
          if (event._tag === "turn") onSeq(event.seq)
          if (event._tag === "exit") reason = event.reason
          return printEvent(event)
        })
      ),
      Effect.map(() => Option.fromNullable(reason))
    )
  })

const session = (by: Principal, spec: unknown, scope: string, prompt: string) =>
  Effect.gen(function*() {
    const corral = yield* Corral
    const agentId = spec === undefined ? DemoAgent.agentId : (yield* corral.publishAgent(by, spec as AgentSpecInput)).id
    const started = yield* corral.start(by, { agentId, scope, prompt })
    yield* Output.line(`session ${started.id} · agent ${agentId} v${started.agentVersion} · scope ${scope}`)
    let last = 0
    const reason = yield* follow(by, started.id, 0, (seq) => (last = seq)).pipe(
      // Ctrl-C: cancel the burst, and still show how it landed (its transcript is kept).
      Effect.onInterrupt(() =>
        Effect.gen(function*() {
          yield* Output.line("    interrupted: cancelling the burst")
          yield* Effect.ignore(corral.cancel(by, started.id))
          yield* Effect.ignore(Effect.timeout(follow(by, started.id, last, () => {}), "10 seconds"))
        })
      )
    )
    const landed = yield* corral.get(by, started.id)
    // Tokens are shown once, to whoever asks for them: a waiting write gets its token issued here.
    const view = landed.pending.length > 0 ? yield* corral.renewApprovals(by, started.id) : landed
    for (const pending of view.pending) {
      yield* Output.line(`    pending    ${pending.tool}(${pending.arguments}) — approve with token ${pending.token}`)
    }
    const ended = Option.getOrElse(reason, () => view.exitReason ?? "crashed")
    yield* Output.line(
      `\nexit ${ended} · ${view.modelCalls} model calls · ${view.toolCalls} tool calls · ` +
        `${view.usage.inputTokens + view.usage.outputTokens} tokens · replay with: corral replay ${started.id}`
    )
    return ended === "completed" ? 0 : 2
  })

// The providers the agent's tier routes to (all of them when the tier is not configured: publishing refuses it).
const routeOf = (models: ProviderConfig.ModelConfig, spec: unknown): ReadonlyArray<string> | undefined => {
  const tier = typeof spec === "object" && spec !== null && "tier" in spec && typeof spec.tier === "string"
    ? spec.tier
    : "default"
  return models.tiers?.[tier]
}

/**
 * Refuses to run when a provider of the agent's route reads its key from an unset variable, unless that provider
 * is a loopback server: the session would otherwise start, send its requests without a key, and end
 * `provider_failed` after a 401 — an exit code of 0 or 2 for what is a configuration error.
 */
const requireKeys = (models: ProviderConfig.ModelConfig, spec: unknown) =>
  Effect.gen(function*() {
    const route = routeOf(models, spec)
    const missing = (yield* ProviderConfig.requiredKeysMissing(models)).filter((m) =>
      route === undefined || route.includes(m.provider)
    )
    if (missing.length === 0) return
    return yield* Effect.fail(
      `${missing.map(ProviderConfig.describeMissingKey).join("\n")}\n` +
        "(only a provider whose baseUrl is a loopback address, or one with \"apiKeyOptional\": true, may run " +
        "without its key)"
    )
  })

const usage =
  "Usage: corral run (--agent FILE | --demo) [--scope S] [--org ORG] [--memory] [--schema NAME] [--config FILE] \"prompt\""

/** The `run` command. */
export const run: Command.Command = {
  name: "run",
  options: {
    ...Command.common,
    agent: "string",
    scope: "string",
    demo: "boolean",
    org: "string",
    memory: "boolean",
    schema: "string"
  },
  interruptedCode: 2,
  help: [
    usage,
    "",
    "Publishes the agent spec in FILE (JSON) and runs one session of it on the configured providers, printing each",
    "event as it happens and the landed report. With --demo and no --agent it runs the built-in scripted demo agent",
    "(no key, no network); with --demo AND --agent, every tier of your agent is routed to the demo model.",
    "The session is stored like any other (replay it with `corral replay SESSION_ID`).",
    "",
    "Exit code: 0 when the burst completed, 2 for any other exit reason (Ctrl-C cancels it), 1 on errors —",
    "including a provider of the agent's tier whose apiKeyEnv variable is unset (unless its baseUrl is loopback).",
    "",
    "Options:",
    "  --agent FILE    the agent spec to publish and run",
    "  --demo          use the built-in demo agent / demo model",
    "  --scope S       what the session investigates (required with --agent; default demo:<random> with --demo)",
    "  --org ORG       the org to act as (default: the local org, or the only configured org)",
    "  --memory        do not persist the session (also CORRAL_STORE=memory)",
    Command.schemaHelp + " (it must exist)",
    Command.commonHelp
  ].join("\n"),
  run: (args: Args.Parsed) =>
    Effect.gen(function*() {
      const prompt = args.positionals.join(" ").trim()
      const file = args.strings.get("agent")
      const demo = args.booleans.has("demo")
      if (file === undefined && !demo) return yield* Effect.fail(`give --agent FILE or --demo\n${usage}`)
      if (prompt.length === 0) return yield* Effect.fail(`give the prompt\n${usage}`)
      const scope = args.strings.get("scope") ??
        (demo && file === undefined ? `demo:${Math.random().toString(36).slice(2, 8)}` : undefined)
      if (scope === undefined) return yield* Effect.fail(`give --scope S\n${usage}`)
      const settings = yield* Command.withSchema(
        args,
        yield* Command.settings(args, [
          ["CORRAL_DEMO", demo ? "true" : undefined],
          ["CORRAL_STORE", args.booleans.has("memory") ? "memory" : undefined]
        ])
      )
      const by = yield* Command.principal(args, settings)
      const spec = file === undefined ? undefined : yield* readJson(file)
      if (!demo) yield* requireKeys(settings.models, spec)
      const runtime = Wiring.layer(settings, [by], { demoEverywhere: demo && file !== undefined })
      return yield* Effect.provide(session(by, spec, scope, prompt), runtime)
    }).pipe(
      Effect.either,
      Effect.flatMap(Either.match({
        onLeft: (error) => Effect.as(Output.error(`corral run: ${Failure.describe(error)}`), 1),
        onRight: Effect.succeed
      }))
    )
}

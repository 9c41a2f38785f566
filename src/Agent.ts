/**
 * Agent — the shortest path from `npm i corral effect` to a tool-using agent on a real model: one call, no service
 * to assemble first. `Agent.run({ prompt, tools })` publishes an ad-hoc agent for a local principal, opens a session
 * in a fresh scope on the all-in-memory runtime, runs the tool loop under every rail Corral has (ceilings, budgets,
 * deadline, retries, failover, repeat and bad-tool guards) and resolves to the answer, the exit reason and the report.
 *
 * It exists because a first program should not need five concepts (a principal, a published agent with id and
 * version, a scope, a providers layer, an `HttpClient` for the whole program) before the first token. None of them
 * is hidden: `session` is the ordinary `SessionView`, and the same program grows into `Corral.layerMemory` (or a
 * durable store) by naming what this module defaults. The model adapters and the HTTP client are loaded on the first
 * call, so importing `corral` does not pay for them.
 */
import type { HttpClient } from "@effect/platform"
import { Config, Effect, Option, Redacted } from "effect"
import type { ConfigError, Layer } from "effect"
import { Corral } from "./Corral.js"
import type { JsonSchema } from "./domain/AgentSpec.js"
import type { AgentNotFound, BudgetExhausted, PersistenceFailed, ScopeMismatch, SendError } from "./domain/Errors.js"
import { FieldIssue, InvalidRequest } from "./domain/Errors.js"
import type { ExitReason } from "./domain/ExitReason.js"
import type { LimitsOverride } from "./domain/Limits.js"
import { Principal } from "./domain/Principal.js"
import type { Report } from "./domain/Report.js"
import type { SessionView } from "./domain/Session.js"
import type { ModelProvider } from "./model/ModelProvider.js"
import type * as ToolRegistry from "./tools/ToolRegistry.js"

/** A real model by its API: OpenAI Chat Completions (and compatible servers) or Anthropic Messages. */
export interface ModelOptions {
  readonly api: "openai" | "anthropic"
  /** The model's name at the provider (`gpt-4o-mini`, `claude-sonnet-4-5`…). */
  readonly model: string
  /** The API root (default: the provider's; for OpenAI-compatible servers with the version, `…/v1`). */
  readonly baseUrl?: string
  /** The key (default: none, for a local server). */
  readonly apiKey?: string | Redacted.Redacted
}

/** What `run` needs: the prompt, and whatever of the rest a first program wants to decide. */
export interface RunOptions {
  readonly prompt: string
  /** The system prompt (default: use the tools when they help, then answer). */
  readonly instructions?: string
  /** In-process tools (`ToolRegistry.define`); every one is offered to the model. */
  readonly tools?: ReadonlyArray<ToolRegistry.ToolHandler>
  /**
   * The model: options of a real one, or any `ModelProvider` (a `ScriptedModel` in a test). Default: from the
   * environment — `OPENAI_API_KEY` and/or `OPENAI_BASE_URL` (with `OPENAI_MODEL`, default `gpt-4o-mini`), else
   * `ANTHROPIC_API_KEY` (with `ANTHROPIC_MODEL`, default `claude-sonnet-4-5`).
   */
  readonly model?: ModelOptions | ModelProvider
  /** Tighter ceilings than the defaults (never looser). */
  readonly limits?: LimitsOverride
  /** The JSON Schema the landing report must match (default: summary, findings, confidence, next steps). */
  readonly reportSchema?: JsonSchema
}

/** How the run went: the model's last answer, why the burst ended, its report, and the session itself. */
export interface Result {
  /** The text of the model's last reply ("" when it said nothing). */
  readonly text: string
  readonly exitReason: ExitReason | undefined
  readonly report: Report | undefined
  readonly session: SessionView
}

/** What `runEffect` can fail with: a request or model choice that is invalid, or the store. */
export type RunError = InvalidRequest | AgentNotFound | ScopeMismatch | BudgetExhausted | SendError | PersistenceFailed

/** The principal `run` acts as: one local user of one local org. */
export const localPrincipal = new Principal({ orgId: "local", userId: "local" })

const defaultInstructions = "You are a helpful agent. Use the tools when they help, then answer the question."

const noModel = new InvalidRequest({
  message: "no model to run the agent on",
  issues: [
    new FieldIssue({
      path: "model",
      message: "pass `model` ({ api, model, baseUrl?, apiKey? }), or set OPENAI_API_KEY (or OPENAI_BASE_URL for a " +
        "local OpenAI-compatible server) or ANTHROPIC_API_KEY"
    })
  ]
})

/** The model options the environment names, through `Config` (so a host's config provider is honoured). */
const fromEnvironment: Effect.Effect<Option.Option<ModelOptions>, ConfigError.ConfigError> = Effect.gen(function*() {
  const env = (name: string) => Config.option(Config.string(name))
  const openAiKey = yield* env("OPENAI_API_KEY")
  const openAiBase = yield* env("OPENAI_BASE_URL")
  if (Option.isSome(openAiKey) || Option.isSome(openAiBase)) {
    return Option.some<ModelOptions>({
      api: "openai",
      model: Option.getOrElse(yield* env("OPENAI_MODEL"), () => "gpt-4o-mini"),
      ...Option.match(openAiBase, { onNone: () => ({}), onSome: (baseUrl) => ({ baseUrl }) }),
      ...Option.match(openAiKey, { onNone: () => ({}), onSome: (apiKey) => ({ apiKey }) })
    })
  }
  const anthropicKey = yield* env("ANTHROPIC_API_KEY")
  if (Option.isNone(anthropicKey)) return Option.none()
  return Option.some<ModelOptions>({
    api: "anthropic",
    model: Option.getOrElse(yield* env("ANTHROPIC_MODEL"), () => "claude-sonnet-4-5"),
    apiKey: anthropicKey.value
  })
})

const isProvider = (model: ModelOptions | ModelProvider): model is ModelProvider => "complete" in model

/** The adapter for `options`, loaded on first use (with its HTTP code) so that importing `corral` stays light. */
const adapter = (options: ModelOptions): Effect.Effect<ModelProvider, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const apiKey = options.apiKey === undefined ? {} : {
      apiKey: typeof options.apiKey === "string" ? Redacted.make(options.apiKey) : options.apiKey
    }
    if (options.api === "anthropic") {
      const Anthropic = yield* Effect.promise(() => import("./model/Anthropic.js"))
      return yield* Anthropic.make({
        name: "anthropic",
        model: options.model,
        ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
        ...apiKey
      })
    }
    const OpenAiCompat = yield* Effect.promise(() => import("./model/OpenAiCompat.js"))
    return yield* OpenAiCompat.make({
      name: "openai",
      model: options.model,
      baseUrl: options.baseUrl ?? "https://api.openai.com/v1",
      ...apiKey
    })
  })

/**
 * One agent run as an Effect: the ad-hoc agent `agent` v1 for `localPrincipal`, one session in a new `adhoc:` scope
 * on `Corral.layerMemory`, awaited until it lands. The HTTP client (the platform's fetch client) lives as long as the
 * run. Fails with `InvalidRequest` naming `model` when no model is given or found in the environment (and naming
 * the field for an invalid prompt, tool list or limits), or with the service's errors; a tripped rail is not an
 * error but the result's `exitReason`.
 */
export const runEffect = (options: RunOptions): Effect.Effect<Result, RunError> =>
  Effect.gen(function*() {
    const chosen = options.model ?? Option.getOrUndefined(yield* Effect.orDie(fromEnvironment))
    if (chosen === undefined) return yield* noModel
    const http = yield* Effect.promise(() => import("@effect/platform/FetchHttpClient"))
    const program = Effect.gen(function*() {
      const model = isProvider(chosen) ? chosen : yield* adapter(chosen)
      const tools = options.tools ?? []
      return yield* Effect.gen(function*() {
        const corral = yield* Corral
        yield* corral.publishAgent(localPrincipal, {
          id: "agent",
          version: 1,
          name: "Agent",
          instructions: options.instructions ?? defaultInstructions,
          tools: tools.map((tool) => tool.name),
          ...(options.reportSchema === undefined ? {} : { reportSchema: options.reportSchema })
        })
        const scope = `adhoc:${(yield* Effect.sync(() => crypto.randomUUID())).slice(0, 8)}`
        const session = yield* corral.run(localPrincipal, { agentId: "agent", scope, prompt: options.prompt })
        const turns = yield* corral.turns(localPrincipal, session.id)
        const last = turns.map((turn) => turn.entry).reverse().find((entry) => entry.kind === "assistant")
        return {
          text: last?.kind === "assistant" ? last.text : "",
          exitReason: session.exitReason,
          report: session.report,
          session
        } satisfies Result
      }).pipe(Effect.provide(Corral.layerMemory({
        providers: [model],
        tools,
        ...(options.limits === undefined ? {} : { limits: options.limits })
      })))
    })
    return yield* Effect.provide(program, http.layer as Layer.Layer<HttpClient.HttpClient>)
  })

/**
 * `runEffect` as a Promise, for a program that does not use Effect itself: resolves to the `Result` (whatever the
 * exit reason), rejects with the typed error (`InvalidRequest` naming `model` when there is none).
 */
export const run = (options: RunOptions): Promise<Result> => Effect.runPromise(runEffect(options))

/**
 * ProviderConfig — the `providers` and `tiers` sections of the configuration file (DESIGN §9), and the layer that
 * turns them into provider routes.
 *
 * Operators write this by hand, and a typo here is silent until the first burst fails over for no visible reason,
 * so `decode` lists every problem with its path: an unknown field (`providers.claude.apikeyEnv: unknown key`), an
 * unknown provider in a tier (naming both), a missing `default` tier. Keys never appear in the file: it names the
 * environment variable holding each key (`apiKeyEnv`), read through `Config.redacted` so the value stays
 * `Redacted` everywhere — logs, errors, spans — and only the adapter's header sees it. An absent variable does not
 * fail the layer — local servers (Ollama, vLLM, llama.cpp) need no key — but it is never silent: `missingKeys`
 * lists every provider whose `apiKeyEnv` names an unset variable, and the entry points say so (`serve` and `corral run`
 * refuse to start unless the provider's `baseUrl` is a loopback address or it says `apiKeyOptional`; a loopback one is
 * a warning). Without that, the requests go
 * out without a key and fail much later, as a 401 that fails over and ends the session `provider_failed`.
 *
 * Every adapter is wrapped in a `StormGuard` once, here: one guard per configured provider, shared by every tier
 * that lists it and every session that calls it.
 */
import type { HttpClient } from "@effect/platform"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Array as Arr, Config, ConfigError, Effect, Either, Layer, Option, Redacted, Schema } from "effect"
import { FieldIssue, fieldIssues } from "../domain/Errors.js"
import { HttpUrl } from "../domain/HttpUrl.js"
import * as Cost from "../rails/Cost.js"
import * as Anthropic from "./Anthropic.js"
import type { ModelProvider } from "./ModelProvider.js"
import { Providers } from "./ModelProvider.js"
import * as OpenAiCompat from "./OpenAiCompat.js"
import * as OpenAiResponses from "./OpenAiResponses.js"
import * as StormGuard from "./StormGuard.js"

const Name = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, {
    message: () => "a name: letters, digits, '_', '.', '-', starting with a letter or digit"
  })
)

const EnvName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]*$/, {
    message: () => "the NAME of an environment variable (letters, digits, '_'), not the key itself"
  })
)

const Positive = Schema.Int.pipe(Schema.positive({ message: () => "a positive integer" }))

/**
 * Which wire format a provider speaks: `openai` (Chat Completions: OpenAI and any compatible server),
 * `openai-responses` (OpenAI's Responses API) or `anthropic` (the Messages API).
 */
export type Api = "openai" | "openai-responses" | "anthropic"
/** The schema of `Api`, with one readable message instead of one per literal. */
export const Api = Schema.String.pipe(
  Schema.filter((s): s is Api => s === "openai" || s === "openai-responses" || s === "anthropic", {
    message: () =>
      "\"openai\" (Chat Completions, any OpenAI-compatible server), \"openai-responses\" (OpenAI's Responses API) " +
      "or \"anthropic\""
  })
)

// `exact`: an absent key is absent, never `undefined` — and errors do not list "expected undefined" alternatives.
const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** One of `values`, with one readable message instead of one per literal. */
const oneOf = <const L extends ReadonlyArray<string>>(...values: L) =>
  Schema.Literal(...values).annotations({
    message: () => ({ message: `one of ${values.map((v) => `"${v}"`).join(", ")}`, override: true })
  })

// Checked as a whole in `settingsIssues`: `budgetTokens` for the manual form, `effort` for the adaptive one.
const Thinking = Schema.Struct({
  type: optional(oneOf("enabled", "adaptive")),
  budgetTokens: optional(Schema.Int.pipe(
    Schema.greaterThanOrEqualTo(1024, { message: () => "at least 1024 (the API's minimum thinking budget)" })
  )),
  effort: optional(oneOf("low", "medium", "high", "max"))
})

const Price = Schema.Number.pipe(
  Schema.filter((n) => Cost.exactPrice(n), {
    message: () => "a price in USD per million tokens: a number ≥ 0 with at most 6 decimals"
  })
)

/**
 * What a provider charges, in USD per million tokens (no built-in price list: prices change, and a stale one would
 * lie). Cache reads and writes default to the input price, reasoning to the output price.
 */
export const Pricing = Schema.Struct({
  inputPerMTok: Price,
  outputPerMTok: Price,
  cacheReadPerMTok: optional(Price),
  cacheWritePerMTok: optional(Price),
  reasoningPerMTok: optional(Price)
})

const Reasoning = Schema.Struct({
  effort: oneOf("minimal", "low", "medium", "high"),
  /** Responses API only: ask for reasoning summaries (`reasoning.summary`). */
  summary: optional(oneOf("auto", "concise", "detailed"))
})

/** One provider: a model behind one API. `baseUrl` defaults to the vendor's public endpoint. */
export const ProviderSettings = Schema.Struct({
  api: Api,
  /** `https://api.openai.com/v1`, `http://localhost:11434/v1` (Ollama), `https://api.anthropic.com`… */
  baseUrl: optional(HttpUrl),
  /** The environment variable holding the key; absent (or unset) = no key, for local servers. */
  apiKeyEnv: optional(EnvName),
  /**
   * Whether the server may start while `apiKeyEnv` is unset although `baseUrl` is not a loopback address (a gateway
   * that authenticates otherwise). Default false: `serve` refuses to start without the key.
   */
  apiKeyOptional: optional(Schema.Boolean),
  model: Schema.NonEmptyTrimmedString,
  /** Per-attempt timeout in ms (default 120 000). */
  timeoutMs: optional(Positive),
  /** Attempts on this provider before failing over (default 3). */
  maxAttempts: optional(Positive),
  /** Extra (non-secret) headers on every request. */
  headers: optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /**
   * Images and audio returned by tools: `send` them to the model (default; see each adapter for what it accepts) or
   * `describe` them only (a model without vision or audio input rejects them).
   */
  attachments: optional(Schema.Literal("send", "describe")),
  /** A cap on every reply's length in tokens (Anthropic: `max_tokens`, default 8192; others: none unless set). */
  maxOutputTokens: optional(Positive),
  /**
   * Anthropic only: extended thinking. `{ "budgetTokens": N }` (N ≥ 1024 and below the call's max tokens) or
   * `{ "type": "adaptive", "effort"?: "low" | "medium" | "high" | "max" }` for the models that offer it.
   */
  thinking: optional(Thinking),
  /** OpenAI (both APIs) only: the reasoning effort of a reasoning model (`reasoning_effort` / `reasoning.effort`). */
  reasoning: optional(Reasoning),
  /**
   * OpenAI Chat Completions only: the name of the output cap on the wire. Default: `max_completion_tokens` for the
   * reasoning model families (`gpt-5*`, `o1`, `o3`, `o4-mini`…), which refuse `max_tokens`; `max_tokens` otherwise.
   */
  tokenParameter: optional(oneOf("max_tokens", "max_completion_tokens")),
  /**
   * OpenAI Chat Completions only: whether the reasoning text a compatible server returns (`reasoning_content` /
   * `reasoning`: DeepSeek, vLLM, OpenRouter…) is sent back with its assistant turn. Default `false`: some servers
   * refuse it in input.
   */
  replayReasoning: optional(Schema.Boolean),
  /**
   * Prompt caching: Anthropic `cache_control` breakpoints (tools, system prompt, newest turn); OpenAI
   * `prompt_cache_key` = the session id (default on for api.openai.com and the Responses API, off for other
   * Chat Completions servers, which may refuse the field). `false` turns it off.
   */
  promptCache: optional(Schema.Boolean),
  /** What the provider charges (`Pricing`): every attempt is priced with it, and cost budgets need it. */
  pricing: optional(Pricing)
})
export type ProviderSettings = typeof ProviderSettings.Type

// Each provider's settings are checked together once their fields decode (a setting for another API, a thinking
// budget that does not fit): these problems are reported even when another provider's fields are wrong.
const CheckedSettings = ProviderSettings.pipe(
  Schema.filter((settings) => settingsIssues(settings).map((issue) => ({ path: issue.path, message: issue.message })))
)

/** The `providers` section: provider name → settings. */
export const ProvidersSection = Schema.Record({ key: Name, value: CheckedSettings })
export type ProvidersSection = typeof ProvidersSection.Type

/** The `tiers` section: tier name → provider names, in failover order (at least one). */
export const TiersSection = Schema.Record({
  key: Name,
  value: Schema.Array(Schema.String).pipe(
    Schema.minItems(1, { message: () => "a non-empty list of provider names, in failover order" })
  )
})
export type TiersSection = typeof TiersSection.Type

/** Both sections. Cross-checked: tiers name only configured providers; `default` exists when providers do. */
export const ModelConfig = Schema.Struct({
  providers: optional(ProvidersSection),
  tiers: optional(TiersSection)
}).pipe(Schema.filter((config) => crossCheck(config).map((issue) => ({ path: issue.path, message: issue.message }))))
export type ModelConfig = typeof ModelConfig.Type

interface PathIssue {
  readonly path: ReadonlyArray<string | number>
  readonly message: string
}

const crossCheck = (config: {
  readonly providers?: ProvidersSection | undefined
  readonly tiers?: TiersSection | undefined
}): Array<PathIssue> => {
  const issues: Array<PathIssue> = []
  const known = Object.keys(config.providers ?? {})
  const tiers = config.tiers ?? {}
  for (const [tier, names] of Object.entries(tiers)) {
    names.forEach((name, index) => {
      if (known.includes(name)) return
      issues.push({
        path: ["tiers", tier, index],
        message: `tier "${tier}" names unknown provider "${name}" (configured: ${
          known.length === 0 ? "none" : known.map((k) => `"${k}"`).join(", ")
        })`
      })
    })
  }
  if (known.length > 0 && tiers.default === undefined) {
    issues.push({
      path: ["tiers", "default"],
      message: "a \"default\" tier is required when providers are configured (agents without a tier use it)"
    })
  }
  return issues
}

// Which settings each API takes: a setting for another API is a mistake the operator must hear about, not a no-op.
const onlyFor: ReadonlyArray<readonly [keyof ProviderSettings, ReadonlyArray<Api>]> = [
  ["thinking", ["anthropic"]],
  ["reasoning", ["openai", "openai-responses"]],
  ["tokenParameter", ["openai"]],
  ["replayReasoning", ["openai"]]
]

function settingsIssues(settings: ProviderSettings): Array<PathIssue> {
  const issues: Array<PathIssue> = []
  for (const [key, apis] of onlyFor) {
    if (settings[key] === undefined || apis.includes(settings.api)) continue
    issues.push({
      path: [key],
      message: `only for "api": ${
        apis.map((api) => `"${api}"`).join(" or ")
      } (this provider's api is "${settings.api}")`
    })
  }
  if (settings.reasoning?.summary !== undefined && settings.api !== "openai-responses") {
    issues.push({
      path: ["reasoning", "summary"],
      message: `only for "api": "openai-responses" (Chat Completions returns no reasoning summary)`
    })
  }
  const thinking = settings.thinking
  if (thinking !== undefined && (thinking.type ?? "enabled") === "enabled") {
    if (thinking.budgetTokens === undefined) {
      issues.push({
        path: ["thinking", "budgetTokens"],
        message: "required for manual thinking (or { \"type\": \"adaptive\" } on the models that offer it)"
      })
    }
    if (thinking.effort !== undefined) {
      issues.push({ path: ["thinking", "effort"], message: "only with { \"type\": \"adaptive\" }" })
    }
  }
  if (thinking?.type === "adaptive" && thinking.budgetTokens !== undefined) {
    issues.push({
      path: ["thinking", "budgetTokens"],
      message: "not with { \"type\": \"adaptive\" }: the model decides how much to think (steer it with effort)"
    })
  }
  if (thinking !== undefined && thinking.type !== "adaptive" && thinking.budgetTokens !== undefined) {
    const max = settings.maxOutputTokens ?? Anthropic.defaultMaxOutputTokens
    if (thinking.budgetTokens >= max) {
      issues.push({
        path: ["thinking", "budgetTokens"],
        message: `${thinking.budgetTokens} must be below the call's max tokens (${max}${
          settings.maxOutputTokens === undefined ? ", the default; raise maxOutputTokens" : ", maxOutputTokens"
        }): thinking is part of the reply's output`
      })
    }
  }
  return issues
}

/** The provider sections are invalid; every problem is listed with its path. */
export class ProviderConfigInvalid extends Schema.TaggedError<ProviderConfigInvalid>()("ProviderConfigInvalid", {
  issues: Schema.Array(FieldIssue)
}) {
  override get message(): string {
    return `invalid provider configuration:\n${this.issues.map((i) => `- ${i.path}: ${i.message}`).join("\n")}`
  }
}

const pathOf = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (acc, key) => typeof key === "number" ? `${acc}[${key}]` : acc === "" ? String(key) : `${acc}.${String(key)}`,
    ""
  )

/**
 * Decodes `{ providers, tiers }` (both optional) from the parsed configuration file. Fails with
 * `ProviderConfigInvalid` listing every problem with its path: wrong or unknown fields, an unknown `api`, a key
 * where an env var name belongs, a tier naming an unknown provider (the message names the tier and the provider),
 * a missing `default` tier.
 */
export const decode = (input: unknown): Either.Either<ModelConfig, ProviderConfigInvalid> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(ModelConfig, { errors: "all", onExcessProperty: "error" })(input),
    (error) =>
      // One line per field: a union's alternatives merged, the optional-key "Expected undefined" echo dropped.
      new ProviderConfigInvalid({ issues: fieldIssues(error, { render: pathOf, unexpected: "unknown key" }) })
  )

/** Options of `layer`: the storm guard's bounds (shared by every provider). */
export interface LayerOptions {
  readonly guard?: StormGuard.Options
}

const apiKey = (settings: ProviderSettings) =>
  settings.apiKeyEnv === undefined
    ? Effect.succeed(undefined)
    : Config.option(Config.redacted(settings.apiKeyEnv)).pipe(
      Effect.map((key) => Option.getOrUndefined(Option.filter(key, (value) => Redacted.value(value).trim() !== "")))
    )

/** A provider whose `apiKeyEnv` names an environment variable that is unset (or blank). */
export interface MissingKey {
  readonly provider: string
  readonly variable: string
  /** The provider's base URL (the vendor's public endpoint when the file gives none). */
  readonly baseUrl: string
  /** Whether `baseUrl` is a loopback address (localhost, 127.0.0.0/8, ::1): a local server that may need no key. */
  readonly loopback: boolean
}

const defaultBaseUrl = (settings: ProviderSettings) =>
  settings.baseUrl ?? (settings.api === "anthropic" ? "https://api.anthropic.com" : "https://api.openai.com/v1")

/** Whether `url`'s host is a loopback address: `localhost` (or a subdomain of it), 127.0.0.0/8 or ::1. */
export const isLoopback = (url: string): boolean => {
  let host: string
  try {
    host = new URL(url).hostname.toLowerCase()
  } catch {
    return false
  }
  return host === "localhost" || host.endsWith(".localhost") || host === "[::1]" || host === "::1" ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
}

/**
 * Every provider of `config` — or only those named in `only` — whose `apiKeyEnv` names a variable the `Config`
 * provider (the environment) does not hold, or holds blank. Providers without `apiKeyEnv` never appear. Never
 * fails: a variable that cannot be read counts as missing.
 */
export const missingKeys = (
  config: ModelConfig,
  only?: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<MissingKey>> =>
  Effect.gen(function*() {
    const missing: Array<MissingKey> = []
    for (const [provider, settings] of Object.entries(config.providers ?? {})) {
      if (settings.apiKeyEnv === undefined || (only !== undefined && !only.includes(provider))) continue
      const key = yield* apiKey(settings).pipe(Effect.orElseSucceed(() => undefined))
      if (key !== undefined) continue
      const baseUrl = defaultBaseUrl(settings)
      missing.push({ provider, variable: settings.apiKeyEnv, baseUrl, loopback: isLoopback(baseUrl) })
    }
    return missing
  })

/**
 * The providers `serve` refuses to start without: an unset `apiKeyEnv`, a base URL that is not a loopback address,
 * and no `apiKeyOptional`. Their requests would all be refused (401), each session ending `provider_failed` long
 * after start-up said nothing.
 */
export const requiredKeysMissing = (config: ModelConfig): Effect.Effect<ReadonlyArray<MissingKey>> =>
  Effect.map(
    missingKeys(config),
    (missing) => missing.filter((m) => !m.loopback && config.providers?.[m.provider]?.apiKeyOptional !== true)
  )

/** One line for a person: which provider, which variable, and what happens without it. */
export const describeMissingKey = (missing: MissingKey): string =>
  `provider "${missing.provider}": apiKeyEnv names ${missing.variable}, which is not set — its requests to ` +
  `${missing.baseUrl} go out without a key${
    missing.loopback ? " (a loopback server may not need one)" : " and will be refused (401)"
  }. Set ${missing.variable}, or remove apiKeyEnv for a server that needs no key.`

/** Builds one adapter (unguarded) from its settings; the key is read from the environment via `Config`. */
export const makeProvider = (
  name: string,
  settings: ProviderSettings
): Effect.Effect<ModelProvider, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const key = yield* apiKey(settings)
    const common = {
      name,
      model: settings.model,
      apiKey: key,
      headers: settings.headers,
      timeoutMs: settings.timeoutMs,
      maxAttempts: settings.maxAttempts,
      attachments: settings.attachments
    }
    const baseUrl = defaultBaseUrl(settings)
    const output = settings.maxOutputTokens === undefined ? {} : { maxOutputTokens: settings.maxOutputTokens }
    switch (settings.api) {
      case "openai":
        return yield* OpenAiCompat.make({
          ...common,
          ...output,
          baseUrl,
          ...(settings.reasoning === undefined ? {} : { reasoning: { effort: settings.reasoning.effort } }),
          ...(settings.tokenParameter === undefined ? {} : { tokenParameter: settings.tokenParameter }),
          ...(settings.replayReasoning === undefined ? {} : { replayReasoning: settings.replayReasoning }),
          ...(settings.promptCache === undefined ? {} : { promptCacheKey: settings.promptCache })
        })
      case "openai-responses":
        return yield* OpenAiResponses.make({
          ...common,
          ...output,
          baseUrl,
          ...(settings.reasoning === undefined ? {} : { reasoning: settings.reasoning }),
          ...(settings.promptCache === undefined ? {} : { promptCacheKey: settings.promptCache })
        })
      case "anthropic":
        return yield* Anthropic.make({
          ...common,
          ...output,
          baseUrl,
          ...(settings.thinking === undefined ? {} : {
            thinking: settings.thinking.type === "adaptive"
              ? {
                type: "adaptive",
                ...(settings.thinking.effort === undefined ? {} : { effort: settings.thinking.effort })
              }
              : { type: "enabled", budgetTokens: settings.thinking.budgetTokens ?? 1024 }
          }),
          ...(settings.promptCache === undefined ? {} : { promptCache: settings.promptCache })
        })
    }
  })

/**
 * The `Providers` routes for `config`: one adapter per provider, each wrapped in its own `StormGuard`, each tier
 * routed to its providers in order. Needs an `HttpClient` (`layerNode` provides Node's). Fails with a
 * `ConfigError` when a key variable cannot be read, or when a tier names an unknown provider (a config that did
 * not pass `decode`).
 */
export const layer = (
  config: ModelConfig,
  options: LayerOptions = {}
): Layer.Layer<Providers, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.effect(
    Providers,
    Effect.gen(function*() {
      const built = new Map<string, ModelProvider>()
      for (const [name, settings] of Object.entries(config.providers ?? {})) {
        const provider = yield* makeProvider(name, settings)
        const priced = {
          ...provider,
          ...(settings.pricing === undefined ? {} : { pricing: Cost.fromUsd(settings.pricing) }),
          ...(settings.maxOutputTokens === undefined ? {} : { maxOutputTokens: settings.maxOutputTokens })
        }
        built.set(name, StormGuard.wrap(priced, options.guard))
      }
      const routes: Record<string, ReadonlyArray<ModelProvider>> = {}
      for (const [tier, names] of Object.entries(config.tiers ?? {})) {
        const providers: Array<ModelProvider> = []
        for (const name of names) {
          const provider = built.get(name)
          if (provider === undefined) {
            return yield* Effect.fail(
              ConfigError.InvalidData(["tiers", tier], `tier "${tier}" names unknown provider "${name}"`)
            )
          }
          providers.push(provider)
        }
        if (Arr.isNonEmptyArray(providers)) routes[tier] = providers
      }
      return Providers.fromRoutes(routes)
    })
  )

/** `layer` over Node's HTTP client (undici). */
export const layerNode = (
  config: ModelConfig,
  options: LayerOptions = {}
): Layer.Layer<Providers, ConfigError.ConfigError> =>
  layer(config, options).pipe(Layer.provide(NodeHttpClient.layerUndici))

import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Layer, Option } from "effect"
import { inspect } from "node:util"
import { Providers } from "../../src/model/ModelProvider.js"
import * as ProviderConfig from "../../src/model/ProviderConfig.js"
import * as Fake from "../support/FakeProvider.js"

const issuesOf = (input: unknown) =>
  Either.match(ProviderConfig.decode(input), {
    onLeft: (error) => error.issues.map((issue) => `${issue.path}: ${issue.message}`),
    onRight: () => []
  })

describe("ProviderConfig.decode", () => {
  it("gives a bad value of a union field one line naming the field, not a line per alternative", () => {
    expect(issuesOf({
      providers: { local: { api: "openai", baseUrl: "http://127.0.0.1:11434/v1", model: "m", attachments: "maybe" } },
      tiers: { default: ["local"] }
    })).toEqual(["providers.local.attachments: Expected one of \"send\", \"describe\", actual \"maybe\""])
  })

  it("accepts OpenAI, Anthropic and a keyless local server, with tiers in failover order", () => {
    const decoded = ProviderConfig.decode({
      providers: {
        openai: { api: "openai", apiKeyEnv: "OPENAI_API_KEY", model: "gpt-4.1-mini", timeoutMs: 60_000 },
        claude: { api: "anthropic", apiKeyEnv: "ANTHROPIC_API_KEY", model: "claude-sonnet-4-5", maxAttempts: 2 },
        local: { api: "openai", baseUrl: "http://localhost:11434/v1", model: "llama3.1:8b" }
      },
      tiers: { default: ["openai", "claude"], cheap: ["local", "openai"] }
    })
    expect(Either.isRight(decoded)).toBe(true)
    expect(Either.getOrThrow(decoded).tiers?.cheap).toEqual(["local", "openai"])
  })

  it("accepts reasoning settings per provider: thinking, adaptive thinking, reasoning effort, the Responses API", () => {
    const decoded = ProviderConfig.decode({
      providers: {
        claude: {
          api: "anthropic",
          model: "claude-sonnet-4-5",
          maxOutputTokens: 16_000,
          thinking: { budgetTokens: 8000 }
        },
        opus: { api: "anthropic", model: "claude-opus-4-6", thinking: { type: "adaptive", effort: "medium" } },
        gpt5: { api: "openai-responses", model: "gpt-5", reasoning: { effort: "high", summary: "auto" } },
        chat: {
          api: "openai",
          model: "gpt-5-mini",
          reasoning: { effort: "minimal" },
          tokenParameter: "max_completion_tokens",
          maxOutputTokens: 4000,
          promptCache: false
        },
        deepseek: {
          api: "openai",
          baseUrl: "https://api.deepseek.com/v1",
          model: "deepseek-chat",
          replayReasoning: true
        }
      },
      tiers: { default: ["gpt5", "claude"], deep: ["opus"], cheap: ["chat", "deepseek"] }
    })
    if (Either.isLeft(decoded)) expect.fail(decoded.left.message)
    expect(Either.getOrThrow(decoded).providers?.claude?.thinking).toEqual({ budgetTokens: 8000 })
  })

  it("takes prices in USD per million tokens, exact to six decimals, and says which field is wrong", () => {
    expect(issuesOf({
      providers: {
        a: { api: "openai", model: "m", pricing: { inputPerMTok: 0.15, outputPerMTok: 0.6, cacheReadPerMTok: 0.075 } },
        b: { api: "openai", model: "m", pricing: { inputPerMTok: -1, outputPerMTok: 0.0000001 } },
        c: { api: "openai", model: "m", pricing: { input: 1 } }
      },
      tiers: { default: ["a"] }
    })).toEqual([
      "providers.b.pricing.inputPerMTok: a price in USD per million tokens: a number ≥ 0 with at most 6 decimals",
      "providers.b.pricing.outputPerMTok: a price in USD per million tokens: a number ≥ 0 with at most 6 decimals",
      "providers.c.pricing.input: unknown key",
      "providers.c.pricing.inputPerMTok: is missing",
      "providers.c.pricing.outputPerMTok: is missing"
    ])
  })

  it("refuses a thinking budget under 1024 or not below the call's max tokens, and settings for another api", () => {
    const issues = issuesOf({
      providers: {
        low: { api: "anthropic", model: "c", thinking: { budgetTokens: 512 } },
        high: { api: "anthropic", model: "c", thinking: { budgetTokens: 8192 } },
        capped: { api: "anthropic", model: "c", maxOutputTokens: 4000, thinking: { budgetTokens: 4000 } },
        odd: { api: "anthropic", model: "c", thinking: { type: "sometimes" } },
        gpt: { api: "openai", model: "gpt-5", thinking: { budgetTokens: 2048 } },
        gpt2: { api: "openai", model: "gpt-5", reasoning: { effort: "max" } },
        adaptive: { api: "anthropic", model: "c", thinking: { type: "adaptive", budgetTokens: 2048 } },
        manual: { api: "anthropic", model: "c", thinking: { effort: "high" } },
        claude: { api: "anthropic", model: "c", reasoning: { effort: "low" }, tokenParameter: "max_tokens" },
        chat: { api: "openai", model: "gpt-5", reasoning: { effort: "low", summary: "auto" } },
        responses: { api: "openai-responses", model: "gpt-5", replayReasoning: true }
      },
      tiers: { default: ["low"] }
    })
    expect(issues).toContain("providers.low.thinking.budgetTokens: at least 1024 (the API's minimum thinking budget)")
    expect(issues).toContain(
      "providers.high.thinking.budgetTokens: 8192 must be below the call's max tokens (8192, the default; raise " +
        "maxOutputTokens): thinking is part of the reply's output"
    )
    expect(issues).toContain(
      "providers.capped.thinking.budgetTokens: 4000 must be below the call's max tokens (4000, maxOutputTokens): " +
        "thinking is part of the reply's output"
    )
    expect(issues).toContain("providers.odd.thinking.type: one of \"enabled\", \"adaptive\"")
    expect(issues).toContain("providers.gpt2.reasoning.effort: one of \"minimal\", \"low\", \"medium\", \"high\"")
    expect(issues).toContain(
      "providers.adaptive.thinking.budgetTokens: not with { \"type\": \"adaptive\" }: the model decides how much to " +
        "think (steer it with effort)"
    )
    expect(issues).toContain(
      "providers.manual.thinking.budgetTokens: required for manual thinking (or { \"type\": \"adaptive\" } on the " +
        "models that offer it)"
    )
    expect(issues).toContain("providers.manual.thinking.effort: only with { \"type\": \"adaptive\" }")
    expect(issues).toContain(
      "providers.gpt.thinking: only for \"api\": \"anthropic\" (this provider's api is \"openai\")"
    )
    expect(issues).toContain(
      "providers.claude.reasoning: only for \"api\": \"openai\" or \"openai-responses\" (this provider's api is " +
        "\"anthropic\")"
    )
    expect(issues).toContain(
      "providers.claude.tokenParameter: only for \"api\": \"openai\" (this provider's api is \"anthropic\")"
    )
    expect(issues).toContain(
      "providers.chat.reasoning.summary: only for \"api\": \"openai-responses\" (Chat Completions returns no " +
        "reasoning summary)"
    )
    expect(issues).toContain(
      "providers.responses.replayReasoning: only for \"api\": \"openai\" (this provider's api is \"openai-responses\")"
    )
  })

  it("accepts an empty configuration (no providers, no tiers)", () => {
    expect(issuesOf({})).toEqual([])
  })

  it("names the tier and the provider when a tier lists an unknown provider", () => {
    expect(issuesOf({
      providers: { openai: { api: "openai", model: "gpt-4.1" } },
      tiers: { default: ["openai"], fast: ["openai", "gtp-4"] }
    })).toEqual([
      "tiers.fast[1]: tier \"fast\" names unknown provider \"gtp-4\" (configured: \"openai\")"
    ])
  })

  it("requires a default tier when providers exist", () => {
    expect(issuesOf({ providers: { openai: { api: "openai", model: "gpt-4.1" } }, tiers: { fast: ["openai"] } }))
      .toEqual([
        "tiers.default: a \"default\" tier is required when providers are configured (agents without a tier use it)"
      ])
  })

  it("lists every field problem with its path: unknown keys, a bad api, a key pasted where its variable belongs", () => {
    const issues = issuesOf({
      providers: {
        a: { api: "gemini", model: "x" },
        b: { api: "openai", model: "gpt", apiKeyEnv: "sk-proj-abc123", baseURL: "https://example.com" },
        c: { api: "anthropic", model: "", baseUrl: "ftp://nope", timeoutMs: -1 }
      },
      tiers: { default: [] }
    })
    expect(issues).toContain(
      "providers.a.api: \"openai\" (Chat Completions, any OpenAI-compatible server), \"openai-responses\" " +
        "(OpenAI's Responses API) or \"anthropic\""
    )
    expect(issues).toContain(
      "providers.b.apiKeyEnv: the NAME of an environment variable (letters, digits, '_'), not the key itself"
    )
    expect(issues).toContain("providers.b.baseURL: unknown key")
    expect(issues).toContain("providers.c.baseUrl: an absolute http:// or https:// URL")
    expect(issues).toContain("providers.c.timeoutMs: a positive integer")
    expect(issues.some((i) => i.startsWith("providers.c.model:"))).toBe(true)
    expect(issues).toContain("tiers.default: a non-empty list of provider names, in failover order")
  })
})

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("ProviderConfig.layer", (it) => {
  it.scoped("builds guarded adapters per provider, routes tiers in order, reads keys via Config and never shows them", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const config = Either.getOrThrow(ProviderConfig.decode({
        providers: {
          compat: { api: "openai", baseUrl: fake.openAiBaseUrl, apiKeyEnv: "FAKE_OPENAI_KEY", model: "gpt-test" },
          claude: { api: "anthropic", baseUrl: fake.anthropicBaseUrl, apiKeyEnv: "FAKE_ANTHROPIC_KEY", model: "c" },
          local: { api: "openai", baseUrl: fake.openAiBaseUrl, apiKeyEnv: "UNSET_KEY", model: "llama" }
        },
        tiers: { default: ["compat", "claude"], local: ["local", "compat"] }
      }))
      const env = ConfigProvider.fromMap(
        new Map([["FAKE_OPENAI_KEY", "sk-secret-openai"], ["FAKE_ANTHROPIC_KEY", "sk-ant-secret"]])
      )
      const providers = yield* Providers.pipe(
        Effect.provide(ProviderConfig.layer(config).pipe(Layer.provide(Layer.setConfigProvider(env))))
      )
      expect(providers.tiers).toEqual(["default", "local"])
      const route = Option.getOrThrow(providers.route("default"))
      const local = Option.getOrThrow(providers.route("local"))
      expect(route.map((p) => p.name)).toEqual(["compat", "claude"])
      expect(local.map((p) => p.name)).toEqual(["local", "compat"])
      // One guard per provider, shared by every tier that lists it.
      expect(local[1]).toBe(route[0])
      expect(Option.isNone(providers.route("nope"))).toBe(true)

      const ask = { system: "", messages: [{ kind: "user", text: "hi" }] as const, tools: [] }
      yield* route[0]!.complete(ask)
      yield* route[1]!.complete(ask)
      yield* local[0]!.complete(ask)
      expect(fake.requests.map((r) => [r.wire, r.headers.authorization, r.headers["x-api-key"]])).toEqual([
        ["openai", "Bearer sk-secret-openai", undefined],
        ["anthropic", undefined, "sk-ant-secret"],
        ["openai", undefined, undefined]
      ])
      const shown = inspect(providers, { depth: 10 }) + JSON.stringify(route)
      expect(shown).not.toContain("sk-secret-openai")
      expect(shown).not.toContain("sk-ant-secret")
    }))
})

describe("ProviderConfig.missingKeys", () => {
  const config = Either.getOrThrow(ProviderConfig.decode({
    providers: {
      openai: { api: "openai", apiKeyEnv: "OPENAI_API_KEY", model: "gpt-4.1-mini" },
      claude: { api: "anthropic", apiKeyEnv: "ANTHROPIC_API_KEY", model: "claude-sonnet-4-5" },
      ollama: { api: "openai", baseUrl: "http://localhost:11434/v1", apiKeyEnv: "OLLAMA_KEY", model: "llama3.1" },
      vllm: { api: "openai", baseUrl: "http://127.0.0.2:8000/v1", apiKeyEnv: "VLLM_KEY", model: "qwen" },
      keyless: { api: "openai", baseUrl: "https://llm.example.com/v1", model: "m" }
    },
    tiers: { default: ["openai", "claude"], local: ["ollama", "vllm"] }
  }))
  const withEnv = (env: Record<string, string>) => <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.withConfigProvider(effect, ConfigProvider.fromMap(new Map(Object.entries(env))))

  it.effect("lists every provider whose apiKeyEnv variable is unset or blank, naming provider and variable", () =>
    Effect.gen(function*() {
      const missing = yield* ProviderConfig.missingKeys(config).pipe(withEnv({ OPENAI_API_KEY: "sk-x", VLLM_KEY: " " }))
      expect(missing).toEqual([
        { provider: "claude", variable: "ANTHROPIC_API_KEY", baseUrl: "https://api.anthropic.com", loopback: false },
        { provider: "ollama", variable: "OLLAMA_KEY", baseUrl: "http://localhost:11434/v1", loopback: true },
        { provider: "vllm", variable: "VLLM_KEY", baseUrl: "http://127.0.0.2:8000/v1", loopback: true }
      ])
      const line = ProviderConfig.describeMissingKey(missing[0]!)
      expect(line).toContain("provider \"claude\"")
      expect(line).toContain("ANTHROPIC_API_KEY")
      expect(line).toContain("401")
    }))

  it.effect("looks only at the providers asked about", () =>
    Effect.gen(function*() {
      const missing = yield* ProviderConfig.missingKeys(config, ["openai"]).pipe(withEnv({}))
      expect(missing.map((m) => m.provider)).toEqual(["openai"])
      expect(yield* ProviderConfig.missingKeys(config, ["keyless"]).pipe(withEnv({}))).toEqual([])
    }))

  it("knows a loopback address when it sees one", () => {
    for (
      const url of ["http://localhost:1/v1", "http://LOCALHOST/v1", "http://127.0.0.1:8080", "http://[::1]:11434/v1"]
    ) {
      expect([url, ProviderConfig.isLoopback(url)]).toEqual([url, true])
    }
    for (const url of ["https://api.openai.com/v1", "http://10.0.0.1", "http://localhost.example.com", "nonsense"]) {
      expect([url, ProviderConfig.isLoopback(url)]).toEqual([url, false])
    }
  })
})

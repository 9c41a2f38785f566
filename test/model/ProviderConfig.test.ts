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
    expect(issues).toContain("providers.a.api: \"openai\" (any OpenAI-compatible server) or \"anthropic\"")
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

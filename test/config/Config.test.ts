/**
 * The configuration: defaults with nothing set, the documented example file, variables winning over the file, and
 * every problem reported at once with its key path (and the variable that supplied it).
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Redacted } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Config from "../../src/config/Config.js"

const example = fileURLToPath(new URL("../../docs/corral.example.json", import.meta.url))

const load = (env: Record<string, string>) =>
  Config.load.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

const withFile = <A, E>(content: unknown, body: (path: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const dir = mkdtempSync(join(tmpdir(), "corral-config-"))
      const path = join(dir, "corral.json")
      writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content))
      return { dir, path }
    }),
    ({ path }) => body(path),
    ({ dir }) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

const issues = (error: Config.ConfigInvalid) => error.issues.map((i) => `${i.path}: ${i.message}`)

describe("Config.load", () => {
  it.effect("gives the defaults when there is no file and no variable", () =>
    Effect.gen(function*() {
      const settings = yield* load({ CORRAL_CONFIG_UNUSED: "x" })
      expect(settings).toEqual(Config.defaults)
    }))

  it.effect("reads the documented example file", () =>
    Effect.gen(function*() {
      const settings = yield* load({ CORRAL_CONFIG: example })
      expect(settings.file).toBe(example)
      expect(Object.keys(settings.models.providers ?? {})).toEqual(["openai", "claude", "local"])
      expect(settings.models.tiers?.default).toEqual(["openai", "claude"])
      expect(Object.keys(settings.mcpServers)).toEqual(["files", "tickets"])
      expect(settings.apiKeys).toHaveLength(1)
      expect(settings.server).toEqual({
        host: "0.0.0.0",
        port: 8787,
        bodyLimitBytes: 1_048_576,
        shutdownTimeoutMs: 10_000,
        keepAliveMs: 15_000,
        maxRunningBursts: 256,
        maxRequestsInFlight: 256,
        mcp: { idleMs: 600_000, maxSessions: 100, maxSessionsPerOrg: 20 }
      })
      expect(settings.limits).toEqual({ modelCallsPerBurst: 12, toolCalls: 40 })
      expect(settings.approvals).toEqual({ ttlMs: 3_600_000 })
      expect(settings.database).toEqual({ _tag: "Embedded", dataDir: "./.corral" })
    }))

  it.effect("lets every variable win over the file", () =>
    Effect.gen(function*() {
      const settings = yield* load({
        CORRAL_CONFIG: example,
        CORRAL_PORT: "9000",
        CORRAL_HOST: "10.0.0.5",
        CORRAL_BODY_LIMIT_BYTES: "2048",
        CORRAL_DEMO: "false",
        CORRAL_DEMO_DELAY_MS: "0",
        CORRAL_TIERS: JSON.stringify({ default: ["claude"] }),
        CORRAL_API_KEYS: "[]",
        CORRAL_MCP_SERVERS: "{}",
        CORRAL_LIMITS: JSON.stringify({ toolCalls: 5 }),
        CORRAL_APPROVAL_TTL_MS: "600000",
        CORRAL_MAX_RUNNING_BURSTS: "0",
        CORRAL_MAX_REQUESTS_IN_FLIGHT: "0",
        DATABASE_URL: "postgres://corral:secret@db/corral"
      })
      expect(settings.server.port).toBe(9000)
      expect(settings.server.host).toBe("10.0.0.5")
      expect(settings.server.bodyLimitBytes).toBe(2048)
      expect(settings.server.maxRunningBursts).toBe(0)
      expect(settings.server.maxRequestsInFlight).toBe(0)
      expect(settings.demo).toEqual({ enabled: false, delayMs: 0 })
      expect(settings.models.tiers).toEqual({ default: ["claude"] })
      expect(settings.apiKeys).toEqual([])
      expect(settings.mcpServers).toEqual({})
      expect(settings.limits).toEqual({ toolCalls: 5 })
      expect(settings.approvals).toEqual({ ttlMs: 600_000 })
      if (settings.database._tag !== "Postgres") throw new Error("expected Postgres")
      expect(Redacted.value(settings.database.url)).toBe("postgres://corral:secret@db/corral")
      expect(String(settings.database.url)).not.toContain("secret")
      expect((yield* load({ CORRAL_CONFIG: example, CORRAL_STORE: "memory" })).database).toEqual({ _tag: "Memory" })
    }))

  it.effect("lists every problem with its key path and expectation, naming the variable that supplied it", () =>
    withFile({
      server: { port: 70_000, bodyLimtBytes: 5, maxRunningBursts: -1, maxRequestsInFlight: 1.5 },
      apiKeys: [{ sha256: "my-plain-key", orgId: "acme" }],
      providers: { openai: { api: "openai", model: "gpt", apiKeyEnv: "sk-123" } },
      mcpServers: { files: { command: "x", url: "http://y" } },
      demo: { enabled: "yes" },
      approvals: { ttlMs: -1 },
      colour: "blue"
    }, (path) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(load({
          CORRAL_CONFIG: path,
          CORRAL_PORT: "http",
          CORRAL_LIMITS: JSON.stringify({ toolCalls: 999 }),
          CORRAL_PROVIDERS_UNUSED: "",
          CORRAL_API_KEYS: "[{\"sha256\": 1"
        }))
        const found = issues(error)
        const paths = error.issues.map((i) => i.path)
        expect(paths).toEqual(expect.arrayContaining([
          "server.port",
          "server.bodyLimtBytes",
          "server.maxRunningBursts",
          "server.maxRequestsInFlight",
          "colour",
          "demo.enabled",
          "approvals.ttlMs",
          "providers.openai.apiKeyEnv",
          "mcpServers.files",
          "limits.toolCalls (from CORRAL_LIMITS)",
          "CORRAL_API_KEYS",
          "CORRAL_PORT"
        ]))
        expect(found.find((i) => i.startsWith("server.bodyLimtBytes"))).toContain("unknown key")
        expect(found.find((i) => i.startsWith("server.port"))).toContain("0 to 65535")
        expect(found.find((i) => i.startsWith("CORRAL_API_KEYS"))).toContain("not valid JSON")
        expect(found.find((i) => i.startsWith("limits.toolCalls"))).toContain("at most 50")
        expect(error.message).toContain(path)
        // One problem, one line: no echo of the same problem at the parent key.
        expect(paths).not.toContain("server")
        expect(new Set(paths).size).toBe(paths.length)
      })))

  it.effect("reads the /mcp bounds (server.mcp), variables winning key by key, and names a bad one", () =>
    Effect.gen(function*() {
      const file = {
        server: { mcp: { idleMs: 60_000, maxSessions: 5, maxSessionsPerOrg: 4, allowedHosts: ["corral.example.com"] } }
      }
      const settings = yield* withFile(
        file,
        (path) =>
          load({
            CORRAL_CONFIG: path,
            CORRAL_MCP_MAX_SESSIONS: "7",
            CORRAL_MCP_MAX_SESSIONS_PER_ORG: "3",
            CORRAL_MCP_ELICITATION_WAIT_MS: "30000"
          })
      )
      expect(settings.server.mcp).toEqual({
        idleMs: 60_000,
        maxSessions: 7,
        maxSessionsPerOrg: 3,
        allowedHosts: ["corral.example.com"],
        elicitationWaitMs: 30_000
      })
      expect((yield* load({ CORRAL_MCP_ALLOWED_HOSTS: "a.example.com,b.example.com" })).server.mcp).toEqual({
        allowedHosts: ["a.example.com", "b.example.com"]
      })
      const error = yield* Effect.flip(withFile(
        {
          server: {
            mcp: { idleMs: 0, maxSessionsPerOrg: 0, allowedHosts: ["https://corral.example.com:443"], waitMs: 1 }
          }
        },
        (path) => load({ CORRAL_CONFIG: path, CORRAL_MCP_MAX_SESSIONS: "many" })
      ))
      const found = issues(error)
      expect(found.find((i) => i.startsWith("server.mcp.idleMs"))).toBeDefined()
      expect(found.find((i) => i.startsWith("server.mcp.maxSessionsPerOrg"))).toBeDefined()
      expect(found.find((i) => i.startsWith("server.mcp.allowedHosts[0]"))).toContain("without scheme or port")
      expect(found.find((i) => i.startsWith("server.mcp.waitMs"))).toContain("unknown key")
      expect(found.find((i) => i.startsWith("CORRAL_MCP_MAX_SESSIONS"))).toBeDefined()
    }))

  it.effect("cross-checks tiers against providers", () =>
    withFile({
      providers: { openai: { api: "openai", model: "gpt-4.1" } },
      tiers: { fast: ["openai", "nope"] }
    }, (path) =>
      Effect.gen(function*() {
        const found = issues(yield* Effect.flip(load({ CORRAL_CONFIG: path })))
        expect(found.find((i) => i.startsWith("tiers.fast[1]"))).toContain("unknown provider \"nope\"")
        expect(found.find((i) => i.startsWith("tiers.default"))).toContain("required")
      })))

  it.effect("refuses a host cost budget over a provider without prices, naming the provider", () =>
    withFile({
      providers: {
        priced: { api: "openai", model: "gpt-5", pricing: { inputPerMTok: 1.25, outputPerMTok: 10 } },
        free: { api: "anthropic", model: "claude-sonnet-4-5" }
      },
      tiers: { default: ["priced", "free"] },
      limits: { costPerSession: 2_000_000 }
    }, (path) =>
      Effect.gen(function*() {
        const found = issues(yield* Effect.flip(load({ CORRAL_CONFIG: path })))
        expect(found).toEqual([
          "providers.free.pricing: required: limits.costPerSession bounds what sessions spend, and this provider has no " +
          "prices"
        ])
        // Priced, it loads.
        const ok = yield* withFile({
          providers: { priced: { api: "openai", model: "gpt-5", pricing: { inputPerMTok: 1.25, outputPerMTok: 10 } } },
          tiers: { default: ["priced"] },
          limits: { costPerBurst: 100_000 }
        }, (p) => load({ CORRAL_CONFIG: p }))
        expect(ok.limits?.costPerBurst).toBe(100_000)
      })))

  it.effect("reads org budgets (file and CORRAL_ORG_BUDGETS); refuses them over unpriced providers and bad values", () =>
    withFile({
      providers: {
        priced: { api: "openai", model: "gpt-5", pricing: { inputPerMTok: 1.25, outputPerMTok: 10 } },
        free: { api: "anthropic", model: "claude-sonnet-4-5" }
      },
      tiers: { default: ["priced", "free"] },
      orgBudgets: { acme: { perDay: 5_000_000 } }
    }, (path) =>
      Effect.gen(function*() {
        expect(issues(yield* Effect.flip(load({ CORRAL_CONFIG: path })))).toEqual([
          "providers.free.pricing: required: orgBudgets bounds what sessions spend, and this provider has no prices"
        ])
        const priced = {
          providers: { priced: { api: "openai", model: "gpt-5", pricing: { inputPerMTok: 1.25, outputPerMTok: 10 } } },
          tiers: { default: ["priced"] }
        }
        const ok = yield* withFile({ ...priced, orgBudgets: { acme: { perDay: 5_000_000 } } }, (p) =>
          load({ CORRAL_CONFIG: p, CORRAL_ORG_BUDGETS: "{\"*\": {\"perDay\": 1000000}}" }))
        expect(ok.orgBudgets).toEqual({ "*": { perDay: 1_000_000 } })
        const bad = yield* withFile({ ...priced, orgBudgets: { acme: { perDay: -1 } } }, (p) =>
          Effect.flip(load({ CORRAL_CONFIG: p })))
        expect(issues(bad)[0]).toMatch(/^orgBudgets\.acme\.perDay: /)
      })))

  it.effect("refuses an explicit CORRAL_CONFIG that does not exist, and a file that is not a JSON object", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.flip(load({ CORRAL_CONFIG: "/nonexistent/corral.json" }))
      expect(issues(missing)[0]).toContain("does not exist")
      const notJson = yield* withFile("{ port: 1 }", (path) => Effect.flip(load({ CORRAL_CONFIG: path })))
      expect(issues(notJson)[0]).toContain("not valid JSON")
      const array = yield* withFile([1, 2], (path) => Effect.flip(load({ CORRAL_CONFIG: path })))
      expect(issues(array)[0]).toContain("expected a JSON object")
    }))
})

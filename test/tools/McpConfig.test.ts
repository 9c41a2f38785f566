import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import * as McpConfig from "../../src/tools/McpConfig.js"

const issues = (input: unknown) =>
  Either.match(McpConfig.decode(input), {
    onLeft: (error) => error.issues.map((i) => `${i.path}: ${i.message}`),
    onRight: () => []
  })

describe("McpConfig", () => {
  it("gives a bad value of a union field one line naming the field, worded as every other decoder words it", () => {
    expect(issues({
      remote: { url: "https://mcp.example.com/mcp", headers: { Authorization: 5 }, effects: { merge: "delete" } }
    })).toEqual([
      "mcpServers.remote.headers.Authorization: Expected one of string, { readonly env: NonEmptyTrimmedString; " +
      "readonly prefix?: string }, actual 5",
      "mcpServers.remote.effects.merge: Expected one of \"read\", \"write\", actual \"delete\""
    ])
  })

  it("decodes stdio and Streamable HTTP servers with their options", () => {
    const decoded = McpConfig.decode({
      github: { command: "npx", args: ["-y", "server"], env: { TOKEN: "t" }, cwd: "/srv", effects: { merge: "write" } },
      remote: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer x" }, timeoutMs: 5000 }
    })
    expect(Either.getOrThrow(decoded)).toEqual({
      github: { command: "npx", args: ["-y", "server"], env: { TOKEN: "t" }, cwd: "/srv", effects: { merge: "write" } },
      remote: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer x" }, timeoutMs: 5000 }
    })
    expect(McpConfig.isStdio(Either.getOrThrow(decoded)["github"]!)).toBe(true)
  })

  it("treats an absent section as no servers", () => {
    expect(McpConfig.decode(undefined)).toEqual(Either.right({}))
  })

  it("names the server and the field of every problem", () => {
    expect(issues({
      github: { command: "npx", args: ["-y", 7], effects: { merge: "delete" }, timeoutMs: 0 },
      remote: { url: "ftp://example.com", header: {} },
      both: { command: "x", url: "http://localhost/mcp" },
      neither: { args: [] },
      "bad name": { command: "x" }
    })).toEqual([
      "mcpServers.github.args[1]: Expected string, actual 7",
      "mcpServers.github.effects.merge: Expected one of \"read\", \"write\", actual \"delete\"",
      "mcpServers.github.timeoutMs: a positive integer (ms)",
      "mcpServers.remote.header: unknown key",
      "mcpServers.remote.url: an absolute http:// or https:// URL",
      "mcpServers.both: give either `command` (stdio) or `url` (Streamable HTTP), not both",
      "mcpServers.neither: missing `command` (a stdio server) or `url` (a Streamable HTTP server)",
      "mcpServers.bad name: a server name: letters, digits, '_', '.', '-', starting with a letter or digit"
    ])
  })

  it("names the prefix field of a bad prefix, a shared prefix and a server configured twice without one", () => {
    expect(issues({
      bad: { command: "npx", prefix: "gh hub" },
      a: { url: "https://mcp.example.com/mcp", prefix: "gh" },
      b: { command: "npx", args: ["-y", "server"], prefix: "gh" },
      c: { command: "npx", args: ["-y", "server"] },
      d: { command: "npx", args: ["-y", "server"] }
    })).toEqual([
      "mcpServers.bad.prefix: a tool-name prefix: 1-32 letters, digits, '_' or '-', starting with a letter or digit",
      "mcpServers.b.prefix: prefix \"gh\" is already the prefix of server \"a\"; give each server its own",
      "mcpServers.d.prefix: server \"d\" is the same server as \"c\" (same command) and would export the same tool " +
      "names: give one of them a distinct `prefix`"
    ])
  })

  it("names what an OAuth client credential is missing or has twice", () => {
    let n = 0
    const oauth = (auth: Record<string, unknown>) => ({
      url: `https://mcp${++n}.example.com/mcp`,
      auth: { type: "oauth", ...auth }
    })
    expect(issues({
      m2m: oauth({ grant: "client_credentials" }),
      keyed: oauth({ grant: "authorization_code", privateKeyEnv: "KEY" }),
      both: oauth({ grant: "client_credentials", clientId: "c", clientSecretEnv: "S", privateKeyEnv: "KEY" }),
      alg: oauth({ grant: "client_credentials", clientId: "c", clientSecretEnv: "S", signingAlgorithm: "ES256" }),
      weak: oauth({ grant: "client_credentials", clientId: "c", privateKeyEnv: "KEY", signingAlgorithm: "HS256" }),
      fine: oauth({ grant: "client_credentials", clientId: "c", privateKeyEnv: "KEY", signingAlgorithm: "ES256" })
    })).toEqual([
      "mcpServers.weak.auth.signingAlgorithm: Expected one of \"RS256\", \"RS384\", \"RS512\", \"PS256\", \"PS384\", " +
      "\"PS512\", \"ES256\", \"ES384\", \"ES512\", actual \"HS256\"",
      "mcpServers.m2m.auth.clientId: the client_credentials grant needs `clientId`",
      "mcpServers.m2m.auth.clientSecretEnv: the client_credentials grant needs `clientSecretEnv` (the environment " +
      "variable holding the secret) or `privateKeyEnv` (holding a private key for private_key_jwt)",
      "mcpServers.keyed.auth.clientId: `privateKeyEnv` needs `clientId`",
      "mcpServers.both.auth.privateKeyEnv: give `clientSecretEnv` or `privateKeyEnv`, not both",
      "mcpServers.alg.auth.signingAlgorithm: `signingAlgorithm` is the algorithm of `privateKeyEnv`'s key: set it too"
    ])
  })

  it.effect("reads the client's key from privateKeyEnv at connect, and names the variable when it is unset", () =>
    Effect.gen(function*() {
      const server = Either.getOrThrow(McpConfig.decode({
        remote: {
          url: "https://mcp.example.com/mcp",
          auth: { type: "oauth", grant: "client_credentials", clientId: "c", privateKeyEnv: "REMOTE_KEY" }
        }
      }))["remote"]!
      const pem = "-----BEGIN PRIVATE KEY-----\nMIG...\n-----END PRIVATE KEY-----"
      const read = McpConfig.oauthCredentialOf(server)
      expect(yield* read.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["REMOTE_KEY", pem]])))))
        .toEqual({ kind: "private_key", pem, algorithm: "RS256" })
      expect(yield* Effect.flip(read.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))))
        .toBe("auth.privateKeyEnv: environment variable REMOTE_KEY is not set")
    }))

  it("accepts the same server twice under distinct prefixes, and names its tools after them", () => {
    const servers = Either.getOrThrow(McpConfig.decode({
      one: { url: "https://mcp.example.com/mcp", prefix: "one" },
      two: { url: "https://mcp.example.com/mcp", prefix: "two-" },
      plain: { url: "https://mcp.example.com/mcp" }
    }))
    expect(McpConfig.toolName(servers["one"]!, "search")).toBe("one_search")
    expect(McpConfig.toolName(servers["two"]!, "search")).toBe("two-search")
    expect(McpConfig.toolName(servers["plain"]!, "search")).toBe("search")
  })

  it("says what it expected when the section is not an object", () => {
    expect(issues(["github"])).toEqual(["mcpServers: expected an object"])
  })

  it("decodes a header read from an environment variable, and the tools a server is expected to offer", () => {
    const remote = {
      url: "https://mcp.example.com/mcp",
      headers: { Authorization: { env: "GITHUB_TOKEN", prefix: "Bearer " }, "X-Team": "sre" },
      tools: ["search"]
    }
    expect(Either.getOrThrow(McpConfig.decode({ remote }))).toEqual({ remote })
    expect(issues({ remote: { url: "https://mcp.example.com/mcp", headers: { A: { env: "" }, B: { name: "X" } } } }))
      .toEqual([
        "mcpServers.remote.headers.A: Expected string, actual {\"env\":\"\"}",
        "mcpServers.remote.headers.A.env: Expected a non empty string, actual \"\"",
        "mcpServers.remote.headers.B: Expected string, actual {\"name\":\"X\"}",
        "mcpServers.remote.headers.B.name: unknown key",
        "mcpServers.remote.headers.B.env: is missing"
      ])
  })

  it.effect("reads env headers through Config, naming the variable (never a value) when it is unset", () =>
    Effect.gen(function*() {
      const server: McpConfig.McpServer = {
        url: "https://mcp.example.com/mcp",
        headers: { Authorization: { env: "GITHUB_TOKEN", prefix: "Bearer " }, "X-Team": "sre" }
      }
      const set = ConfigProvider.fromMap(new Map([["GITHUB_TOKEN", "ghp_123"]]))
      expect(yield* McpConfig.headersOf(server).pipe(Effect.withConfigProvider(set))).toEqual({
        Authorization: "Bearer ghp_123",
        "X-Team": "sre"
      })
      const unset = ConfigProvider.fromMap(new Map())
      expect(yield* Effect.flip(McpConfig.headersOf(server).pipe(Effect.withConfigProvider(unset)))).toBe(
        "header \"Authorization\": environment variable GITHUB_TOKEN is not set"
      )
    }))
})

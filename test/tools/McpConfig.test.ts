import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as McpConfig from "../../src/tools/McpConfig.js"

const issues = (input: unknown) =>
  Either.match(McpConfig.decode(input), {
    onLeft: (error) => error.issues.map((i) => `${i.path}: ${i.message}`),
    onRight: () => []
  })

describe("McpConfig", () => {
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
      "mcpServers.github.effects.merge: Expected \"read\" | \"write\", actual \"delete\"",
      "mcpServers.github.timeoutMs: a positive integer (ms)",
      "mcpServers.remote.header: unknown key",
      "mcpServers.remote.url: an absolute http:// or https:// URL",
      "mcpServers.both: give either `command` (stdio) or `url` (Streamable HTTP), not both",
      "mcpServers.neither: missing `command` (a stdio server) or `url` (a Streamable HTTP server)",
      "mcpServers.bad name: a server name: letters, digits, '_', '.', '-', starting with a letter or digit"
    ])
  })

  it("says what it expected when the section is not an object", () => {
    expect(issues(["github"])).toEqual(["mcpServers: expected an object"])
  })
})

/**
 * A node's stop keeps its bound and takes its MCP children with it (issue 46): `corral serve` (a child process,
 * embedded PGlite store) with a stdio MCP server that ignores SIGTERM and the end of its stdin, stopped with SIGTERM
 * under a short shutdown bound (0.2 s of drain, then the 2 s every node has to close its layers). The node exits 0
 * within that bound, and its MCP child does not outlive it. Before the fix the node exited only when the MCP SDK's
 * own close sent its SIGKILL, 4 s into the close (the close ran on a fiber the process's exit waits for), about 2 s
 * past the bound. Real processes, every wait bounded.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fixture } from "../support/McpServers.js"
import { corral, eventually } from "../support/ServerHarness.js"

/** The children of process `parent` that are alive (not zombies) and run `script`, from /proc. */
const childrenOf = (parent: number, script: string): Array<number> =>
  readdirSync("/proc").flatMap((name) => {
    if (!/^\d+$/.test(name)) return []
    try {
      // `pid (comm) state ppid ...`: comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${name}/stat`, "utf8")
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      const command = readFileSync(`/proc/${name}/cmdline`, "utf8")
      return Number(ppid) === parent && state !== "Z" && command.includes(script) ? [Number(name)] : []
    } catch {
      return []
    }
  })

const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] !== "Z"
  } catch {
    return false
  }
}

it.live.skipIf(process.platform !== "linux")(
  "SIGTERM: the node exits 0 within its bound (drain + 2 s) and its MCP child, which traps SIGTERM, does not outlive it",
  () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "corral-shutdown-mcp-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const config = join(dir, "corral.json")
      writeFileSync(config, JSON.stringify({ mcpServers: { stubborn: fixture(["--stubborn", "--only", "echo"]) } }))
      const child = corral(["serve", "--port", "0"], {
        CORRAL_CONFIG: config,
        CORRAL_DATA_DIR: join(dir, "data"),
        CORRAL_SHUTDOWN_TIMEOUT_MS: "200"
      }, dir)
      const pid = child.process.pid!
      const spawned: Array<number> = []
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          child.process.kill("SIGKILL")
          for (const mcp of spawned) {
            try {
              process.kill(mcp, "SIGKILL")
            } catch {
              // gone
            }
          }
        })
      )
      yield* eventually(
        "the server to listen",
        Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
        "90 seconds"
      )
      const mcp = yield* eventually(
        "the MCP server to be spawned",
        // The node's other children (tsx's esbuild service) end with it anyway: the MCP server is the subject.
        Effect.sync(() => childrenOf(pid, "mcp-fixture.ts")[0]),
        "30 seconds"
      )
      spawned.push(mcp)
      const sentAt = Date.now()
      child.process.kill("SIGTERM")
      const code = yield* Effect.promise(() => child.exited).pipe(
        Effect.timeoutFail({ duration: "15 seconds", onTimeout: () => "the node did not exit" })
      )
      const took = Date.now() - sentAt
      expect(code).toBe(0)
      // The bound: the drain's 0.2 s and 2 s to close the layers, plus 1.3 s for a loaded machine (the signal's
      // handling was seen 0.8 s late, the process's own exit 0.5 s after its last line). The code before the fix
      // exited 4.4 and 4.7 s after the signal here (before and after 41e56a3); with it, 1.7–2.1 s.
      expect(took, `the node exited ${took} ms after SIGTERM`).toBeLessThan(200 + 2_000 + 1_300)
      yield* eventually("the MCP child to be gone", Effect.sync(() => alive(mcp) ? undefined : true), "1 second")
    }).pipe(Effect.scoped),
  { timeout: 180_000 }
)

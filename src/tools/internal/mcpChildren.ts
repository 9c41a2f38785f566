/**
 * The stdio MCP servers this process spawned and has not seen exit, killed when the process exits.
 *
 * A child process outlives its parent unless something ends it. The registry closes a stdio server gracefully (stdin
 * end, then SIGTERM, then SIGKILL, up to 4 s per server) as its layer closes; but a node whose layers did not close
 * within the shutdown's bound exits without waiting for them, and its MCP children were seen running after it. So the
 * process's `exit` hook (synchronous: nothing can be awaited there) sends SIGKILL to every child still listed: the
 * process is leaving, and a server that would not stop for stdin's end or SIGTERM would not stop at all. A child is
 * forgotten as soon as it is seen to exit, so a pid the system has since reused is never signalled.
 */

const live = new Set<number>()
let hooked = false

const killAll = () => {
  for (const pid of live) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // Already gone.
    }
  }
  live.clear()
}

/** Lists a spawned child (its pid) to be killed at the process's exit; the hook is installed on the first. */
export const track = (pid: number): void => {
  live.add(pid)
  if (!hooked) {
    hooked = true
    process.once("exit", killAll)
  }
}

/** Forgets a child that exited. */
export const untrack = (pid: number): void => {
  live.delete(pid)
}

/** Whether `pid` is listed: spawned here and not yet seen to exit. */
export const isLive = (pid: number): boolean => live.has(pid)

/** The children listed now (for tests). */
export const tracked = (): ReadonlyArray<number> => [...live]

/**
 * `--count-ops` (a diagnostic of the workload): counts the instructions Effect's run loop executes, by opcode and by
 * the function each one carries (a continuation, a thunk), so a pass over the turn path can see WHICH combinators a
 * turn pays for — a CPU profile cannot: most of the runtime's samples have no caller's frame on their stack.
 *
 * It wraps the opcode methods of the `FiberRuntime` class of the copy of `effect` the workload imports (located the
 * way Node resolves it from here, then its ESM internal module by path: the same module instance as the package's
 * own). Every wrapped call then costs a map update and, for a site, the function's source text: timings taken with
 * it on mean nothing. A site is named by the first 110 characters of that source text (whitespace folded), which
 * is enough to find it in Corral's sources or in effect's `dist/esm`; an instruction that carries no function (a
 * `Success`, a runtime-flags update) is named after the last one that did, on any fiber.
 */
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"

/** What the counter saw; `report` formats it per model turn. */
export interface OpCount {
  readonly report: (turns: number, top: number) => string
}

type Op = {
  readonly effect_instruction_i0?: unknown
  readonly effect_instruction_i1?: unknown
  readonly commit?: unknown
}

const text = (f: unknown): string => typeof f === "function" ? f.toString().replace(/\s+/g, " ").slice(0, 110) : "-"

/** Starts counting (for the rest of the process). */
export const start = async (): Promise<OpCount> => {
  const effectDir = dirname(createRequire(import.meta.url).resolve("effect/package.json"))
  const url = pathToFileURL(join(effectDir, "dist", "esm", "internal", "fiberRuntime.js")).href
  const mod = (await import(url)) as { FiberRuntime: { prototype: Record<string, unknown> } }
  const proto = mod.FiberRuntime.prototype
  const byOpcode = new Map<string, number>()
  const bySite = new Map<string, number>()
  let previous = "-"
  // The run loop dispatches on `this[op._op](op)`: opcodes are capitalised method names ("Sync", "OnSuccess", …).
  for (const name of Object.getOwnPropertyNames(proto)) {
    const original = proto[name]
    if (!/^[A-Z]/.test(name) || typeof original !== "function") continue
    proto[name] = function(this: unknown, op: Op) {
      byOpcode.set(name, (byOpcode.get(name) ?? 0) + 1)
      // The function that says where the instruction comes from: a continuation's, else a thunk's, else the
      // `commit` of a suspended effect.
      const carried = name.startsWith("On") ? op.effect_instruction_i1 : op.effect_instruction_i0
      const own = typeof carried === "function" ? carried : op.commit
      // An instruction that carries no function (a `Success`, a flags update) is named after the one before it.
      const site = typeof own === "function" ? `${name} | ${text(own)}` : `${name} after ${previous}`
      if (typeof own === "function") previous = site
      bySite.set(site, (bySite.get(site) ?? 0) + 1)
      return (original as (this: unknown, op: Op) => unknown).call(this, op)
    }
  }
  return {
    report: (turns, top) => {
      const per = (n: number) => (n / Math.max(1, turns)).toFixed(2).padStart(8)
      const total = [...byOpcode.values()].reduce((a, b) => a + b, 0)
      const lines = [`Effect instructions: ${total} over ${turns} model turns (${per(total).trim()} per turn)`]
      for (const [name, n] of [...byOpcode].sort((a, b) => b[1] - a[1])) lines.push(`${per(n)}  ${name}`)
      lines.push(`top ${top} sites (per turn | opcode | the function the instruction carries):`)
      for (const [site, n] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`${per(n)}  ${site}`)
      return `${lines.join("\n")}\n`
    }
  }
}

/**
 * Args — a small argv parser (the CLI has no framework dependency): `--flag value`, `--flag=value`, boolean
 * `--flag`, `-h`, and `--` to end the options. Unknown flags and missing values are errors that name the flag, so
 * a typo never silently runs a command with defaults.
 */
import { Either } from "effect"

/** What a command accepts: flag name (without dashes) → whether it takes a value. */
export type Spec = Readonly<Record<string, "string" | "boolean">>

/** A parsed command line. */
export interface Parsed {
  readonly positionals: ReadonlyArray<string>
  readonly strings: ReadonlyMap<string, string>
  readonly booleans: ReadonlySet<string>
}

/**
 * Parses `argv` (without the command words) against `spec`; `--help`/`-h` is always accepted as the boolean
 * `help`. Fails with a message naming the unknown flag or the flag missing its value.
 */
export const parse = (argv: ReadonlyArray<string>, spec: Spec): Either.Either<Parsed, string> => {
  const positionals: Array<string> = []
  const strings = new Map<string, string>()
  const booleans = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--") {
      positionals.push(...argv.slice(i + 1))
      break
    }
    if (arg === "-h" || arg === "--help") {
      booleans.add("help")
      continue
    }
    if (!arg.startsWith("--") || arg.length === 2) {
      positionals.push(arg)
      continue
    }
    const eq = arg.indexOf("=")
    const name = arg.slice(2, eq < 0 ? undefined : eq)
    const kind = spec[name]
    if (kind === undefined) return Either.left(`unknown option --${name}`)
    if (kind === "boolean") {
      if (eq >= 0) return Either.left(`option --${name} takes no value`)
      booleans.add(name)
      continue
    }
    const value = eq >= 0 ? arg.slice(eq + 1) : argv[++i]
    if (value === undefined || (eq < 0 && value.startsWith("--"))) return Either.left(`option --${name} needs a value`)
    strings.set(name, value)
  }
  return Either.right({ positionals, strings, booleans })
}

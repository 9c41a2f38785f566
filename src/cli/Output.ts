/**
 * Output — the CLI's terminal: the one module in src/ that writes to stdout and stderr directly. Everything the
 * commands print goes through here, so tests and the rest of the code never depend on a console.
 */
import { Effect } from "effect"

/** Writes one line to stdout. Never fails. */
export const line = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stdout.write(`${text}\n`))

/** Writes lines to stdout. Never fails. */
export const lines = (texts: ReadonlyArray<string>): Effect.Effect<void> =>
  texts.length === 0 ? Effect.void : line(texts.join("\n"))

/** Writes one line to stderr. Never fails. */
export const error = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stderr.write(`${text}\n`))

/**
 * Command — what every `corral` command is (name, help, options, body) and the helpers they share: loading the
 * configuration with command-line overrides, and choosing the principal a local command acts as.
 *
 * Command-line flags override environment variables, which override the file: a flag is turned into the variable
 * it stands for and read through the same `Config` path, so there is one precedence rule and one set of checks.
 */
import { ConfigProvider, Effect, Redacted } from "effect"
import * as Config from "../config/Config.js"
import { Principal } from "../domain/Principal.js"
import * as Authentication from "../server/Authentication.js"
import { isSchemaName } from "../sql.js"
import type * as Args from "./Args.js"

/** One command. `run` resolves to the process exit code and never fails (errors are printed, code 1). */
export interface Command {
  readonly name: string
  /** The full `--help` text of the command. */
  readonly help: string
  readonly options: Args.Spec
  /** The exit code when a signal interrupts the command (default 130, the shell's convention for SIGINT). */
  readonly interruptedCode?: number
  readonly run: (args: Args.Parsed) => Effect.Effect<number>
}

/** Runs `self` with the given variables set on top of the configuration provider in force (flags over env). */
export const withOverrides = <A, E, R>(
  overrides: ReadonlyArray<readonly [string, string | undefined]>,
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const set = overrides.filter((entry): entry is readonly [string, string] => entry[1] !== undefined)
  if (set.length === 0) return self
  // Over the provider in force (the environment, unless a host or a test set another).
  return Effect.configProviderWith((current) =>
    Effect.withConfigProvider(self, ConfigProvider.orElse(ConfigProvider.fromMap(new Map(set)), () => current))
  )
}

/** The configuration, with `--config FILE` honoured. */
export const settings = (args: Args.Parsed, overrides: ReadonlyArray<readonly [string, string | undefined]> = []) =>
  withOverrides([["CORRAL_CONFIG", args.strings.get("config")], ...overrides], Config.load)

/**
 * `--schema NAME`: the Postgres schema that holds Corral's tables, as `corral/sql`'s `layerSql({ url, schema })`
 * keeps them, so the CLI reads (and writes) an embedder's sessions. It goes on every connection's `search_path`
 * through the URL's `options` parameter (a startup option: no statement runs with another). Fails with a message
 * naming the flag for a name that is not a plain lowercase identifier, or without a Postgres server (DATABASE_URL).
 */
export const withSchema = (args: Args.Parsed, settings: Config.Settings): Effect.Effect<Config.Settings, string> => {
  const schema = args.strings.get("schema")
  if (schema === undefined) return Effect.succeed(settings)
  if (!isSchemaName(schema)) {
    return Effect.fail(
      `--schema: "${schema}" is not a schema name (a lowercase identifier: letters, digits and '_', at most 63 ` +
        "characters, not starting with pg_)"
    )
  }
  const database = settings.database
  if (database._tag !== "Postgres") {
    return Effect.fail("--schema: needs a Postgres server (DATABASE_URL); the embedded database has one schema")
  }
  const url = new URL(Redacted.value(database.url))
  url.searchParams.set("options", `-c search_path=${schema}`)
  return Effect.succeed({ ...settings, database: { ...database, url: Redacted.make(url.toString()) } })
}

/** The help line for `--schema`. */
export const schemaHelp =
  "  --schema NAME   the Postgres schema of Corral's tables (corral/sql's `schema`; needs DATABASE_URL)"

/**
 * The principal a local command acts as: `--org` (and `--user`), else the local principal without API keys, else
 * the only configured org. Fails with a message when several orgs are configured and none was chosen.
 */
export const principal = (args: Args.Parsed, settings: Config.Settings): Effect.Effect<Principal, string> => {
  const org = args.strings.get("org")
  const user = args.strings.get("user") ?? "cli"
  if (org !== undefined) return Effect.succeed(new Principal({ orgId: org, userId: user }))
  const orgs = Authentication.orgs(settings.apiKeys)
  if (orgs.length === 1) return Effect.succeed(orgs[0]!)
  return Effect.fail(`several orgs are configured (${orgs.map((o) => o.orgId).join(", ")}): choose one with --org`)
}

/** The options every command takes. */
export const common: Args.Spec = { config: "string" }

/** The help lines for the common options. */
export const commonHelp = "  --config FILE   configuration file (default ./corral.json; also CORRAL_CONFIG)"

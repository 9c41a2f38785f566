/**
 * Config — the one configuration of a Corral process (DESIGN §9): a JSON file (path in `CORRAL_CONFIG`, default
 * `./corral.json`; an absent default file means defaults), every key overridable by an environment variable
 * (`EnvVars`), the variable winning.
 *
 * Operators write the file by hand and set variables in deployment manifests, where a typo is silent until the
 * first request fails. So loading is all-or-nothing and lists EVERY problem at once, each with the key path and
 * what was expected (`server.port: expected an integer from 0 to 65535, got "http"`; `apiKeys[0].sha256: ...`),
 * and names the variable when the bad value came from one. Unknown keys are errors, not ignored: a misspelt
 * `bodyLimtBytes` must not silently keep the default. `providers`/`tiers` and `mcpServers` are decoded by their
 * owners (`model/ProviderConfig`, `tools/McpConfig`) so their cross-checks and messages are the same everywhere.
 *
 * Everything is read through effect's `Config` (so tests swap the `ConfigProvider`); this folder is the only
 * place in Corral that reads the environment. Secrets (`DATABASE_URL`) stay `Redacted`.
 *
 * This file holds the sections' schemas, the settings and `load`; reading the file is internal/file.ts, the scalar
 * variables internal/environment.ts, the error internal/invalid.ts.
 */
import type { ParseResult } from "effect"
import { Config as EffectConfig, Effect, Either, Option, Redacted, Schema } from "effect"
import { FieldIssue, fieldIssues } from "../domain/Errors.js"
import { LimitsOverride } from "../domain/Limits.js"
import * as ProviderConfig from "../model/ProviderConfig.js"
import * as Cost from "../rails/Cost.js"
import * as Limits from "../rails/Limits.js"
import * as OrgBudget from "../rails/OrgBudget.js"
import * as Telemetry from "../telemetry/Settings.js"
import type * as Approvals from "../tools/Approvals.js"
import * as McpConfig from "../tools/McpConfig.js"
import type { FileShape } from "./internal/environment.js"
import { described, environment } from "./internal/environment.js"
import { parseJson, readFileSection } from "./internal/file.js"
import { ConfigInvalid, configIssues } from "./internal/invalid.js"

/** The configuration is invalid; `issues` lists every problem with its key path (and source when not the file). */
export { ConfigInvalid } from "./internal/invalid.js"

/** One API key: the SHA-256 of the bearer key (never the key itself) and the principal it authenticates. */
export const ApiKey = Schema.Struct({
  sha256: Schema.String.pipe(
    Schema.pattern(/^[0-9a-f]{64}$/, {
      message: () => "the lowercase hex SHA-256 of the key (64 characters), never the key itself"
    })
  ),
  orgId: Schema.NonEmptyTrimmedString,
  userId: Schema.NonEmptyTrimmedString
})
export type ApiKey = typeof ApiKey.Type

const got = (issue: ParseResult.ParseIssue): string => `got ${JSON.stringify(issue.actual) ?? "undefined"}`
const Positive = Schema.Int.pipe(Schema.positive({ message: (issue) => `a positive integer, ${got(issue)}` }))
const Port = Schema.Int.pipe(
  Schema.between(0, 65535, { message: (issue) => `an integer from 0 to 65535, ${got(issue)}` })
)

/** A host name as `Host` and `Origin` carry it, without a port (`corral.example.com`, `10.0.0.5`). */
const HostName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/, {
    message: (issue) => `a host name without scheme or port (e.g. "corral.example.com"), ${got(issue)}`
  })
)

/**
 * `server.mcp`: the bounds of Corral's own MCP endpoint (`/mcp`, and `corral mcp` for `elicitationWaitMs`). Each key
 * absent = the endpoint's default (`src/server/mcp/Http.ts`, `Protocol.ts`; docs/mcp.md).
 */
export const McpEndpointSection = Schema.Struct({
  /** A session with no request in flight for this long is closed (default 10 min). */
  idleMs: Schema.optional(Positive),
  /** Sessions open at once, all orgs together: a backstop (default 100). */
  maxSessions: Schema.optional(Positive),
  /** Sessions open at once per org; a new one beyond closes the org's least recently used idle one (default 20). */
  maxSessionsPerOrg: Schema.optional(Positive),
  /** Host names besides the loopback ones that `Host` and `Origin` may name (DNS-rebinding protection). */
  allowedHosts: Schema.optional(Schema.Array(HostName)),
  /** How long a host's person has to answer an approval asked through elicitation (default 10 min). */
  elicitationWaitMs: Schema.optional(Positive)
})
export type McpEndpointSettings = typeof McpEndpointSection.Type

/** The `server` section. */
export const ServerSection = Schema.Struct({
  host: Schema.optional(Schema.NonEmptyTrimmedString),
  port: Schema.optional(Port),
  bodyLimitBytes: Schema.optional(Positive),
  shutdownTimeoutMs: Schema.optional(Positive),
  keepAliveMs: Schema.optional(Positive),
  maxRunningBursts: Schema.optional(
    Schema.Int.pipe(Schema.nonNegative({ message: (issue) => `a non-negative integer (0 = no cap), ${got(issue)}` }))
  ),
  maxRequestsInFlight: Schema.optional(
    Schema.Int.pipe(Schema.nonNegative({ message: (issue) => `a non-negative integer (0 = no cap), ${got(issue)}` }))
  ),
  mcp: Schema.optional(McpEndpointSection)
})

/** The `database` section. `url` is better given as `DATABASE_URL` (it holds a password). */
export const DatabaseSection = Schema.Struct({
  store: Schema.optional(Schema.Literal("sql", "memory")),
  url: Schema.optional(Schema.NonEmptyTrimmedString),
  dataDir: Schema.optional(Schema.NonEmptyTrimmedString),
  maxConnections: Schema.optional(Positive)
})

/** The `cluster` section: whether sessions are hosted as cluster entities, and this runner's address. */
export const ClusterSection = Schema.Struct({
  enabled: Schema.optional(Schema.Boolean),
  host: Schema.optional(Schema.NonEmptyTrimmedString),
  port: Schema.optional(Port),
  lockExpirationMs: Schema.optional(Positive),
  healthCheckMs: Schema.optional(Positive)
})

/** The `approvals` section: how long an approval token approves. */
export const ApprovalsSection = Schema.Struct({
  ttlMs: Schema.optional(Positive)
})

/** The `demo` section: the built-in scripted agent. */
export const DemoSection = Schema.Struct({
  enabled: Schema.optional(Schema.Boolean),
  delayMs: Schema.optional(Schema.NonNegativeInt)
})

/** The sections this module decodes (the model and MCP sections are decoded by their owners). */
const sections = {
  apiKeys: Schema.Array(ApiKey),
  database: DatabaseSection,
  server: ServerSection,
  cluster: ClusterSection,
  limits: LimitsOverride,
  orgBudgets: OrgBudget.Settings,
  approvals: ApprovalsSection,
  demo: DemoSection
} as const

/** Every top-level key the file may have. */
const topLevel = new Set(["$schema", "providers", "tiers", "mcpServers", "telemetry", ...Object.keys(sections)])

/** Where sessions are stored. */
export type DatabaseSettings =
  | { readonly _tag: "Postgres"; readonly url: Redacted.Redacted; readonly maxConnections: number }
  | { readonly _tag: "Embedded"; readonly dataDir: string }
  | { readonly _tag: "Memory" }

/** How the HTTP server listens and shuts down. */
export interface ServerSettings {
  readonly host: string
  readonly port: number
  readonly bodyLimitBytes: number
  readonly shutdownTimeoutMs: number
  readonly keepAliveMs: number
  /** Bursts running at once in the process; the surplus waits with its message stored (`session/Admission`; 0 = no cap). */
  readonly maxRunningBursts: number
  /**
   * Requests worked on at once; the surplus waits its turn, untouched (`server/RequestGate`; 0 = no cap). Probes,
   * `/mcp` and `?wait=true` requests are never held.
   */
  readonly maxRequestsInFlight: number
  /** Bounds of Corral's own MCP endpoint; each absent key is the endpoint's default. */
  readonly mcp: McpEndpointSettings
}

/** Cluster hosting (`corral serve --cluster`, docs/cluster.md). */
export interface ClusterSettings {
  readonly enabled: boolean
  /** The address other runners reach this one at; the runner listens on it. */
  readonly host: string
  readonly port: number
  /** How long a shard lock outlives its holder's last refresh: a dead node's sessions move after this. */
  readonly lockExpirationMs: number
  /**
   * How often a runner writes its heartbeat and checks the others: a runner that refuses its pings (dead) is marked
   * unhealthy and its shards move at once (their advisory locks went with its database connection); one whose
   * heartbeat is older than three periods (a lost machine, cut off from Postgres) is marked unhealthy and its
   * connections are ended, which frees its locks (cluster/Watchdog, docs/cluster.md).
   */
  readonly healthCheckMs: number
}

/** The built-in demo agent. */
export interface DemoSettings {
  readonly enabled: boolean
  readonly delayMs: number
}

/** The resolved configuration: file, then environment, then defaults. */
export interface Settings {
  /** The file that was read, or `undefined` when none existed at the default path. */
  readonly file: string | undefined
  readonly models: ProviderConfig.ModelConfig
  readonly mcpServers: McpConfig.McpServers
  readonly apiKeys: ReadonlyArray<ApiKey>
  readonly database: DatabaseSettings
  readonly server: ServerSettings
  readonly cluster: ClusterSettings
  readonly limits: LimitsOverride | undefined
  /** Daily budgets per org id, `"*"` for every other org (`rails/OrgBudget`); empty: none. */
  readonly orgBudgets: OrgBudget.Settings
  readonly approvals: Approvals.Settings
  readonly demo: DemoSettings
  /** Export (OTLP), content capture and log format (`telemetry/Settings`). */
  readonly telemetry: Telemetry.TelemetrySettings
}

/** The defaults, for hosts that build settings in code (tests). */
export const defaults: Settings = {
  file: undefined,
  models: {},
  mcpServers: {},
  apiKeys: [],
  database: { _tag: "Embedded", dataDir: "./.corral" },
  server: {
    host: "127.0.0.1",
    port: 8787,
    bodyLimitBytes: 1_048_576,
    shutdownTimeoutMs: 10_000,
    keepAliveMs: 15_000,
    maxRunningBursts: 256,
    maxRequestsInFlight: 256,
    mcp: {}
  },
  cluster: { enabled: false, host: "127.0.0.1", port: 34431, lockExpirationMs: 35_000, healthCheckMs: 2_000 },
  limits: undefined,
  orgBudgets: {},
  approvals: { ttlMs: 3_600_000 },
  demo: { enabled: true, delayMs: 700 },
  telemetry: Telemetry.defaults
}

const pathOf = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (acc, key) => typeof key === "number" ? `${acc}[${key}]` : acc === "" ? String(key) : `${acc}.${String(key)}`,
    ""
  )

// One line per field: union alternatives merged, the optional-key "Expected undefined" echo dropped (fieldIssues).
const issuesOf = (error: ParseResult.ParseError, prefix: string): Array<FieldIssue> =>
  fieldIssues(error, { prefix: [prefix], render: pathOf, unexpected: "unknown key" })

/** Decodes each section on its own, so one bad section never hides another's problems. */
const decodeSections = (raw: Record<string, unknown>): { shape: FileShape; issues: Array<FieldIssue> } => {
  const issues: Array<FieldIssue> = []
  for (const key of Object.keys(raw)) {
    if (!topLevel.has(key)) issues.push(new FieldIssue({ path: key, message: "unknown key" }))
  }
  const section = <A, I>(key: keyof typeof sections, schema: Schema.Schema<A, I>): { readonly value?: A } => {
    if (raw[key] === undefined) return {}
    const decoded = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(raw[key])
    if (Either.isRight(decoded)) return { value: decoded.right }
    issues.push(...issuesOf(decoded.left, key))
    return {}
  }
  const apiKeys = section("apiKeys", sections.apiKeys).value
  const database = section("database", sections.database).value
  const server = section("server", sections.server).value
  const cluster = section("cluster", sections.cluster).value
  const limits = section("limits", sections.limits).value
  const orgBudgets = section("orgBudgets", sections.orgBudgets).value
  const approvals = section("approvals", sections.approvals).value
  const demo = section("demo", sections.demo).value
  const shape: FileShape = {
    ...(apiKeys === undefined ? {} : { apiKeys }),
    ...(database === undefined ? {} : { database }),
    ...(server === undefined ? {} : { server }),
    ...(cluster === undefined ? {} : { cluster }),
    ...(limits === undefined ? {} : { limits }),
    ...(orgBudgets === undefined ? {} : { orgBudgets }),
    ...(approvals === undefined ? {} : { approvals }),
    ...(demo === undefined ? {} : { demo })
  }
  return { shape, issues }
}

/** The structured keys a JSON variable may replace. */
const jsonVars = [
  ["CORRAL_PROVIDERS", "providers"],
  ["CORRAL_TIERS", "tiers"],
  ["CORRAL_MCP_SERVERS", "mcpServers"],
  ["CORRAL_API_KEYS", "apiKeys"],
  ["CORRAL_LIMITS", "limits"],
  ["CORRAL_ORG_BUDGETS", "orgBudgets"]
] as const

/**
 * Loads the configuration: the file, then the JSON variables over its structured keys, then the scalar variables,
 * then the defaults. Fails with `ConfigInvalid` listing every problem (key path, expectation, and the variable
 * when one supplied the value); never fails with anything else.
 */
export const load: Effect.Effect<Settings, ConfigInvalid> = Effect.gen(function*() {
  const { path, raw } = yield* readFileSection
  const source = path ?? "defaults and environment"
  const issues: Array<FieldIssue> = []
  const merged: Record<string, unknown> = { ...raw }
  const fromVar = new Map<string, string>()

  for (const [name, key] of jsonVars) {
    const value = yield* EffectConfig.option(described(name, EffectConfig.string(name))).pipe(Effect.orDie)
    if (Option.isNone(value)) continue
    const parsed = parseJson(value.value)
    if (Either.isLeft(parsed)) {
      issues.push(new FieldIssue({ path: name, message: parsed.left }))
      continue
    }
    merged[key] = parsed.right
    fromVar.set(key, name)
  }
  // An issue under a key a variable replaced is that variable's fault: say so.
  const label = (issue: FieldIssue): FieldIssue => {
    const top = issue.path.split(/[.[]/)[0] ?? ""
    const name = fromVar.get(top)
    return name === undefined ? issue : new FieldIssue({ path: `${issue.path} (from ${name})`, message: issue.message })
  }

  const file = decodeSections(merged)
  issues.push(...file.issues.map(label))
  const models = ProviderConfig.decode({
    ...(merged.providers === undefined ? {} : { providers: merged.providers }),
    ...(merged.tiers === undefined ? {} : { tiers: merged.tiers })
  })
  if (Either.isLeft(models)) issues.push(...models.left.issues.map(label))
  const mcp = McpConfig.decode(merged.mcpServers)
  if (Either.isLeft(mcp)) issues.push(...mcp.left.issues.map(label))
  const shape = file.shape
  const tightened = Limits.tighten(Limits.defaults, shape.limits)
  if (Either.isLeft(tightened)) issues.push(...tightened.left.issues.map(label))
  // A cost budget of the host, or an org's daily budget, bounds every agent: every provider must say what it charges.
  else if (
    Either.isRight(models) && (Cost.bounded(tightened.right) || Object.keys(shape.orgBudgets ?? {}).length > 0)
  ) {
    const budget = shape.limits?.costPerSession !== undefined
      ? "limits.costPerSession"
      : shape.limits?.costPerBurst !== undefined
      ? "limits.costPerBurst"
      : "orgBudgets"
    for (const [name, settings] of Object.entries(models.right.providers ?? {})) {
      if (settings.pricing !== undefined) continue
      issues.push(label(
        new FieldIssue({
          path: `providers.${name}.pricing`,
          message: `required: ${budget} bounds what sessions spend, and this provider has no prices`
        })
      ))
    }
  }

  const telemetrySection = Telemetry.decodeSection(merged.telemetry)
  if (Either.isLeft(telemetrySection)) issues.push(...telemetrySection.left)
  const telemetry = yield* Effect.either(
    Telemetry.environment(Either.isRight(telemetrySection) ? telemetrySection.right : undefined)
  )
  if (Either.isLeft(telemetry)) issues.push(...configIssues(telemetry.left))
  const scalars = yield* Effect.either(environment(shape, defaults))
  if (Either.isLeft(scalars)) issues.push(...configIssues(scalars.left))
  if (
    issues.length > 0 || Either.isLeft(scalars) || Either.isLeft(models) || Either.isLeft(mcp) ||
    Either.isLeft(telemetry)
  ) {
    return yield* new ConfigInvalid({ source, issues })
  }
  const env = scalars.right
  const url = Option.orElse(env.url, () => Option.map(Option.fromNullable(shape.database?.url), Redacted.make))
  const database: DatabaseSettings = env.store === "memory"
    ? { _tag: "Memory" }
    : Option.match(url, {
      onNone: () => ({ _tag: "Embedded", dataDir: env.dataDir }),
      onSome: (value) => ({ _tag: "Postgres", url: value, maxConnections: env.maxConnections })
    })
  return {
    file: path,
    models: models.right,
    mcpServers: mcp.right,
    apiKeys: shape.apiKeys ?? [],
    database,
    server: {
      host: env.host,
      port: env.port,
      bodyLimitBytes: env.bodyLimitBytes,
      shutdownTimeoutMs: env.shutdownTimeoutMs,
      keepAliveMs: env.keepAliveMs,
      maxRunningBursts: env.maxRunningBursts,
      maxRequestsInFlight: env.maxRequestsInFlight,
      mcp: {
        ...shape.server?.mcp,
        ...Option.match(env.mcpIdleMs, { onNone: () => ({}), onSome: (idleMs) => ({ idleMs }) }),
        ...Option.match(env.mcpMaxSessions, { onNone: () => ({}), onSome: (maxSessions) => ({ maxSessions }) }),
        ...Option.match(env.mcpMaxSessionsPerOrg, {
          onNone: () => ({}),
          onSome: (maxSessionsPerOrg) => ({ maxSessionsPerOrg })
        }),
        ...Option.match(env.mcpAllowedHosts, { onNone: () => ({}), onSome: (allowedHosts) => ({ allowedHosts }) }),
        ...Option.match(env.mcpElicitationWaitMs, {
          onNone: () => ({}),
          onSome: (elicitationWaitMs) => ({ elicitationWaitMs })
        })
      }
    },
    cluster: {
      enabled: env.clusterEnabled,
      host: env.clusterHost,
      port: env.clusterPort,
      lockExpirationMs: env.clusterLockExpirationMs,
      healthCheckMs: env.clusterHealthCheckMs
    },
    limits: shape.limits,
    orgBudgets: shape.orgBudgets ?? {},
    approvals: { ttlMs: env.approvalTtlMs },
    demo: { enabled: env.demoEnabled, delayMs: env.demoDelayMs },
    telemetry: telemetry.right
  }
})

/** CLI settings: where a running server is, and the key to send it (both optional). */
export const client = EffectConfig.all({
  server: EffectConfig.option(described("CORRAL_SERVER", EffectConfig.string("CORRAL_SERVER"))),
  apiKey: EffectConfig.option(described("CORRAL_API_KEY", EffectConfig.redacted("CORRAL_API_KEY")))
})

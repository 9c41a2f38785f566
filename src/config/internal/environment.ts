/**
 * environment — the scalar variables of the configuration (Config), read through effect's `Config` (so tests swap
 * the `ConfigProvider`), each described by its entry in the variable table (`internal/envVars`) and defaulting to the
 * file's value, then to the built-in default.
 */
import { Config as EffectConfig } from "effect"
import type { LimitsOverride } from "../../domain/Limits.js"
import * as EnvVars from "../../internal/envVars.js"
import type * as OrgBudget from "../../rails/OrgBudget.js"
import type {
  ApiKey,
  ApprovalsSection,
  ClusterSection,
  DatabaseSection,
  DemoSection,
  ServerSection,
  Settings
} from "../Config.js"

/** The decoded sections (each absent when not given). */
export interface FileShape {
  readonly apiKeys?: ReadonlyArray<ApiKey>
  readonly database?: typeof DatabaseSection.Type
  readonly server?: typeof ServerSection.Type
  readonly cluster?: typeof ClusterSection.Type
  readonly limits?: LimitsOverride
  readonly orgBudgets?: OrgBudget.Settings
  readonly approvals?: typeof ApprovalsSection.Type
  readonly demo?: typeof DemoSection.Type
}

/** `config`, described by variable `name`'s entry in the table. */
export const described = <A>(name: string, config: EffectConfig.Config<A>): EffectConfig.Config<A> =>
  EffectConfig.withDescription(config, EnvVars.byName(name).description)

const positive = (name: string, fallback: number) =>
  described(
    name,
    EffectConfig.integer(name).pipe(
      EffectConfig.validate({ message: "Expected a positive integer", validation: (n) => n > 0 }),
      EffectConfig.withDefault(fallback)
    )
  )

const optionalPositive = (name: string) =>
  EffectConfig.option(described(
    name,
    EffectConfig.integer(name).pipe(
      EffectConfig.validate({ message: "Expected a positive integer", validation: (n) => n > 0 })
    )
  ))

/** The scalar variables, each defaulting to the file's value, then to the built-in default. */
export const environment = (file: FileShape, defaults: Settings) =>
  EffectConfig.all({
    store: described(
      "CORRAL_STORE",
      EffectConfig.literal("sql", "memory")("CORRAL_STORE").pipe(
        EffectConfig.withDefault(file.database?.store ?? "sql")
      )
    ),
    url: EffectConfig.option(described("DATABASE_URL", EffectConfig.redacted("DATABASE_URL"))),
    dataDir: described(
      "CORRAL_DATA_DIR",
      EffectConfig.nonEmptyString("CORRAL_DATA_DIR").pipe(
        EffectConfig.withDefault(file.database?.dataDir ?? "./.corral")
      )
    ),
    maxConnections: positive("CORRAL_DB_MAX_CONNECTIONS", file.database?.maxConnections ?? 10),
    host: described(
      "CORRAL_HOST",
      EffectConfig.nonEmptyString("CORRAL_HOST").pipe(
        EffectConfig.withDefault(file.server?.host ?? defaults.server.host)
      )
    ),
    port: described(
      "CORRAL_PORT",
      EffectConfig.integer("CORRAL_PORT").pipe(
        EffectConfig.validate({ message: "Expected a port from 0 to 65535", validation: (n) => n >= 0 && n <= 65535 }),
        EffectConfig.withDefault(file.server?.port ?? defaults.server.port)
      )
    ),
    bodyLimitBytes: positive("CORRAL_BODY_LIMIT_BYTES", file.server?.bodyLimitBytes ?? defaults.server.bodyLimitBytes),
    shutdownTimeoutMs: positive(
      "CORRAL_SHUTDOWN_TIMEOUT_MS",
      file.server?.shutdownTimeoutMs ?? defaults.server.shutdownTimeoutMs
    ),
    keepAliveMs: positive("CORRAL_KEEPALIVE_MS", file.server?.keepAliveMs ?? defaults.server.keepAliveMs),
    maxRunningBursts: described(
      "CORRAL_MAX_RUNNING_BURSTS",
      EffectConfig.integer("CORRAL_MAX_RUNNING_BURSTS").pipe(
        EffectConfig.validate({ message: "Expected a non-negative integer (0 = no cap)", validation: (n) => n >= 0 }),
        EffectConfig.withDefault(file.server?.maxRunningBursts ?? defaults.server.maxRunningBursts)
      )
    ),
    maxRequestsInFlight: described(
      "CORRAL_MAX_REQUESTS_IN_FLIGHT",
      EffectConfig.integer("CORRAL_MAX_REQUESTS_IN_FLIGHT").pipe(
        EffectConfig.validate({ message: "Expected a non-negative integer (0 = no cap)", validation: (n) => n >= 0 }),
        EffectConfig.withDefault(file.server?.maxRequestsInFlight ?? defaults.server.maxRequestsInFlight)
      )
    ),
    clusterEnabled: described(
      "CORRAL_CLUSTER",
      EffectConfig.boolean("CORRAL_CLUSTER").pipe(
        EffectConfig.withDefault(file.cluster?.enabled ?? defaults.cluster.enabled)
      )
    ),
    clusterHost: described(
      "CORRAL_CLUSTER_HOST",
      EffectConfig.nonEmptyString("CORRAL_CLUSTER_HOST").pipe(
        EffectConfig.withDefault(file.cluster?.host ?? defaults.cluster.host)
      )
    ),
    clusterPort: described(
      "CORRAL_CLUSTER_PORT",
      EffectConfig.integer("CORRAL_CLUSTER_PORT").pipe(
        EffectConfig.validate({ message: "Expected a port from 1 to 65535", validation: (n) => n >= 1 && n <= 65535 }),
        EffectConfig.withDefault(file.cluster?.port ?? defaults.cluster.port)
      )
    ),
    clusterLockExpirationMs: positive(
      "CORRAL_CLUSTER_LOCK_EXPIRATION_MS",
      file.cluster?.lockExpirationMs ?? defaults.cluster.lockExpirationMs
    ),
    clusterHealthCheckMs: positive(
      "CORRAL_CLUSTER_HEALTH_CHECK_MS",
      file.cluster?.healthCheckMs ?? defaults.cluster.healthCheckMs
    ),
    mcpIdleMs: optionalPositive("CORRAL_MCP_IDLE_MS"),
    mcpMaxSessions: optionalPositive("CORRAL_MCP_MAX_SESSIONS"),
    mcpMaxSessionsPerOrg: optionalPositive("CORRAL_MCP_MAX_SESSIONS_PER_ORG"),
    mcpAllowedHosts: EffectConfig.option(described(
      "CORRAL_MCP_ALLOWED_HOSTS",
      EffectConfig.array(EffectConfig.nonEmptyString(), "CORRAL_MCP_ALLOWED_HOSTS").pipe(
        EffectConfig.validate({
          message: "Expected host names without scheme or port, comma-separated (e.g. corral.example.com)",
          validation: (hosts) => hosts.every((h) => /^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(h))
        })
      )
    )),
    mcpElicitationWaitMs: optionalPositive("CORRAL_MCP_ELICITATION_WAIT_MS"),
    approvalTtlMs: positive("CORRAL_APPROVAL_TTL_MS", file.approvals?.ttlMs ?? defaults.approvals.ttlMs),
    demoEnabled: described(
      "CORRAL_DEMO",
      EffectConfig.boolean("CORRAL_DEMO").pipe(EffectConfig.withDefault(file.demo?.enabled ?? defaults.demo.enabled))
    ),
    demoDelayMs: described(
      "CORRAL_DEMO_DELAY_MS",
      EffectConfig.integer("CORRAL_DEMO_DELAY_MS").pipe(
        EffectConfig.validate({ message: "Expected a non-negative integer", validation: (n) => n >= 0 }),
        EffectConfig.withDefault(file.demo?.delayMs ?? defaults.demo.delayMs)
      )
    )
  })

/**
 * envVars — every environment variable Corral reads, in one table: the configuration loader builds its `Config`s
 * from it and `corral --help` prints it, so the documentation cannot drift from what is actually read.
 *
 * An environment variable always wins over the configuration file; structured keys (`providers`, `tiers`,
 * `mcpServers`, `apiKeys`, `limits`) take JSON.
 */

/** One variable: its name, the configuration key it overrides, what it means, and its default. */
export interface EnvVar {
  readonly name: string
  /** The configuration-file key it overrides (dotted), or `-` when it has no file counterpart. */
  readonly key: string
  readonly description: string
  readonly default?: string
  /** Read with `Config.redacted`: never logged or echoed. */
  readonly secret?: boolean
}

/** Every variable, in the order `--help` lists them. */
export const all: ReadonlyArray<EnvVar> = [
  {
    name: "CORRAL_CONFIG",
    key: "-",
    description: "Path of the JSON configuration file (absent file = defaults)",
    default: "./corral.json"
  },
  {
    name: "CORRAL_PROVIDERS",
    key: "providers",
    description: "Model providers, JSON: name → { api, baseUrl, apiKeyEnv, model, ... }"
  },
  {
    name: "CORRAL_TIERS",
    key: "tiers",
    description: "Provider routes, JSON: tier → [provider, ...] (\"default\" required with providers)"
  },
  {
    name: "CORRAL_MCP_SERVERS",
    key: "mcpServers",
    description:
      "MCP tool servers, JSON: name → { command, args?, env? } or { url, headers? } (+ effects?, tools?, exclude?, timeoutMs?, prefix?, roots?, sampling?); " +
      "a header value may be { env: VAR, prefix? } to read a token from the environment; an HTTP server may take " +
      "auth: { type: \"oauth\", grant, clientId?, clientSecretEnv? | privateKeyEnv? (+ signingAlgorithm?), scopes? }"
  },
  {
    name: "CORRAL_SECRET_KEY",
    key: "-",
    description:
      "Key (16+ characters, e.g. `openssl rand -hex 32`) sealing MCP servers' OAuth tokens in the SQL store " +
      "(AES-256-GCM); unset = tokens kept in memory only",
    secret: true
  },
  {
    name: "CORRAL_API_KEYS",
    key: "apiKeys",
    description: "API keys, JSON: [{ sha256, orgId, userId }] (none = local-only, one local principal)"
  },
  {
    name: "DATABASE_URL",
    key: "database.url",
    description: "Postgres connection URL; wins over the embedded database",
    secret: true
  },
  {
    name: "CORRAL_STORE",
    key: "database.store",
    description: "\"sql\" (Postgres or embedded PGlite) or \"memory\" (nothing survives a restart)",
    default: "sql"
  },
  {
    name: "CORRAL_DATA_DIR",
    key: "database.dataDir",
    description: "Directory of the embedded PGlite database (used without DATABASE_URL)",
    default: "./.corral"
  },
  {
    name: "CORRAL_DB_MAX_CONNECTIONS",
    key: "database.maxConnections",
    description: "Postgres connection pool size (used with DATABASE_URL)",
    default: "10"
  },
  {
    name: "CORRAL_HOST",
    key: "server.host",
    description: "Interface to listen on (forced to 127.0.0.1 while no API keys are configured)",
    default: "127.0.0.1"
  },
  { name: "CORRAL_PORT", key: "server.port", description: "Port to listen on (0 = any free port)", default: "8787" },
  {
    name: "CORRAL_CLUSTER",
    key: "cluster.enabled",
    description: "\"true\": host sessions as @effect/cluster entities shared with other nodes (needs DATABASE_URL)",
    default: "false"
  },
  {
    name: "CORRAL_CLUSTER_HOST",
    key: "cluster.host",
    description: "Cluster mode: the address other nodes reach this runner at (it listens on it too)",
    default: "127.0.0.1"
  },
  {
    name: "CORRAL_CLUSTER_PORT",
    key: "cluster.port",
    description: "Cluster mode: the runner's port (node-to-node messages)",
    default: "34431"
  },
  {
    name: "CORRAL_CLUSTER_LOCK_EXPIRATION_MS",
    key: "cluster.lockExpirationMs",
    description: "Cluster mode: how long a dead node's shards stay locked before another node takes them over",
    default: "35000"
  },
  {
    name: "CORRAL_CLUSTER_HEALTH_CHECK_MS",
    key: "cluster.healthCheckMs",
    description:
      "Cluster mode: how often a node pings the others; a dead node's shards move once a check finds it dead",
    default: "2000"
  },
  {
    name: "CORRAL_BODY_LIMIT_BYTES",
    key: "server.bodyLimitBytes",
    description: "Largest accepted request body; larger ones get 413",
    default: "1048576"
  },
  {
    name: "CORRAL_SHUTDOWN_TIMEOUT_MS",
    key: "server.shutdownTimeoutMs",
    description: "On SIGTERM/SIGINT: how long running bursts may take to land before the process exits",
    default: "10000"
  },
  {
    name: "CORRAL_KEEPALIVE_MS",
    key: "server.keepAliveMs",
    description: "Interval of keep-alive comments on event streams",
    default: "15000"
  },
  {
    name: "CORRAL_MAX_RUNNING_BURSTS",
    key: "server.maxRunningBursts",
    description: "Bursts running at once in the process; the surplus waits, its message stored (0 = no cap)",
    default: "256"
  },
  {
    name: "CORRAL_MAX_REQUESTS_IN_FLIGHT",
    key: "server.maxRequestsInFlight",
    description: "Requests worked on at once; the surplus waits its turn (503 past 60 s or a full line; 0 = no cap)",
    default: "256"
  },
  {
    name: "CORRAL_MCP_IDLE_MS",
    key: "server.mcp.idleMs",
    description: "/mcp: close a session with no request in flight for this long",
    default: "600000 (10 min)"
  },
  {
    name: "CORRAL_MCP_MAX_SESSIONS",
    key: "server.mcp.maxSessions",
    description: "/mcp: sessions open at once, all orgs together (a backstop; see the per-org cap)",
    default: "100"
  },
  {
    name: "CORRAL_MCP_MAX_SESSIONS_PER_ORG",
    key: "server.mcp.maxSessionsPerOrg",
    description: "/mcp: sessions open at once per org (a new one beyond closes the org's least recently used idle one)",
    default: "20"
  },
  {
    name: "CORRAL_MCP_ALLOWED_HOSTS",
    key: "server.mcp.allowedHosts",
    description: "/mcp: host names (comma-separated, no port) besides loopback that Host and Origin may name"
  },
  {
    name: "CORRAL_MCP_ELICITATION_WAIT_MS",
    key: "server.mcp.elicitationWaitMs",
    description: "/mcp and corral mcp: how long a host's person has to answer an approval asked by elicitation",
    default: "600000 (10 min)"
  },
  {
    name: "CORRAL_LIMITS",
    key: "limits",
    description: "Tighter loop ceilings, JSON: { modelCallsPerBurst: 10, ... } (may only tighten)"
  },
  {
    name: "CORRAL_ORG_BUDGETS",
    key: "orgBudgets",
    description:
      "Daily budgets per org in micro-dollars, JSON: { \"acme\": { \"perDay\": 5000000 }, \"*\": { \"perDay\": 1000000 } }"
  },
  {
    name: "CORRAL_DEMO",
    key: "demo.enabled",
    description: "Offer the built-in scripted `demo` agent, its tier and its canned tools",
    default: "true"
  },
  {
    name: "CORRAL_APPROVAL_TTL_MS",
    key: "approvals.ttlMs",
    description: "How long an approval token of a pending write approves, in milliseconds",
    default: "3600000"
  },
  {
    name: "CORRAL_DEMO_DELAY_MS",
    key: "demo.delayMs",
    description: "Think time of the demo model per reply, so a viewer can watch the turns arrive",
    default: "700"
  },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    key: "telemetry.endpoint",
    description: "OTLP/HTTP collector base URL: traces and metrics are exported there (absent = no export, no spans)"
  },
  {
    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
    key: "telemetry.protocol",
    description: "\"http/protobuf\" or \"http/json\" (a collector's 4318 port takes both; protobuf costs less to send)",
    default: "http/protobuf"
  },
  {
    name: "OTEL_EXPORTER_OTLP_HEADERS",
    key: "telemetry.headers",
    description: "Headers sent with every export, k1=v1,k2=v2 (percent-encoded values)",
    secret: true
  },
  {
    name: "OTEL_SERVICE_NAME",
    key: "telemetry.serviceName",
    description: "service.name of the exported telemetry",
    default: "corral"
  },
  {
    name: "OTEL_RESOURCE_ATTRIBUTES",
    key: "telemetry.resourceAttributes",
    description: "Extra resource attributes, k1=v1,k2=v2 (percent-encoded values)"
  },
  {
    name: "OTEL_TRACES_SAMPLER",
    key: "telemetry.sampler",
    description:
      "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio",
    default: "parentbased_always_on"
  },
  {
    name: "OTEL_TRACES_SAMPLER_ARG",
    key: "telemetry.samplerArg",
    description: "Sampling ratio of the *traceidratio samplers, 0..1",
    default: "1"
  },
  {
    name: "OTEL_METRIC_EXPORT_INTERVAL",
    key: "telemetry.metricIntervalMs",
    description: "Interval of metric exports, in milliseconds",
    default: "60000"
  },
  {
    name: "OTEL_BSP_MAX_QUEUE_SIZE",
    key: "-",
    description: "Most spans held for export at once (in the open batch and unanswered exports); more are dropped",
    default: "2048"
  },
  {
    name: "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    key: "-",
    description: "Spans per export request (a batch leaves when it is this full, or after OTEL_BSP_SCHEDULE_DELAY)",
    default: "512"
  },
  {
    name: "OTEL_BSP_SCHEDULE_DELAY",
    key: "-",
    description: "Longest a span waits for its batch to leave, in milliseconds",
    default: "5000"
  },
  {
    name: "OTEL_BSP_EXPORT_TIMEOUT",
    key: "-",
    description: "Longest one span export may take, retries included, in milliseconds (then its spans are dropped)",
    default: "30000"
  },
  {
    name: "OTEL_SDK_DISABLED",
    key: "-",
    description: "\"true\": export nothing whatever else is set",
    default: "false"
  },
  {
    name: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    key: "telemetry.captureContent",
    description: "\"true\": record prompts, completions and tool arguments/results on spans (off: never)",
    default: "false"
  },
  {
    name: "CORRAL_LOG_FORMAT",
    key: "telemetry.logFormat",
    description: "Log lines: \"json\", \"pretty\", or \"auto\" (JSON when stdout is not a terminal)",
    default: "auto"
  },
  {
    name: "CORRAL_SERVER",
    key: "-",
    description: "CLI only: base URL of a running server for `agents publish` and `replay` (else the local store)"
  },
  { name: "CORRAL_API_KEY", key: "-", description: "CLI only: bearer key sent to CORRAL_SERVER", secret: true }
]

/** The variable named `name`. Throws for a name missing from the table: that is a programming error. */
export const byName = (name: string): EnvVar => {
  const found = all.find((v) => v.name === name)
  if (found === undefined) throw new Error(`EnvVars: "${name}" is not in the table`)
  return found
}

/** The table as `--help` prints it: one variable per line, key and default after the description. */
export const helpText = (): string => {
  const width = Math.max(...all.map((v) => v.name.length)) + 2
  return all.map((v) => {
    const notes = [
      v.key === "-" ? undefined : `key ${v.key}`,
      v.default === undefined ? undefined : `default ${v.default}`,
      v.secret === true ? "secret" : undefined
    ].filter((n): n is string => n !== undefined)
    return `  ${v.name.padEnd(width)}${v.description}${notes.length > 0 ? ` [${notes.join("; ")}]` : ""}`
  }).join("\n")
}

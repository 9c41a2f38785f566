/**
 * `corral serve` (= `npm start`) — the HTTP API, its docs and the live viewer, until SIGTERM/SIGINT.
 */
import { Effect } from "effect"
import * as Main from "../server/main.js"
import * as Logs from "../telemetry/Logs.js"
import * as Telemetry from "../telemetry/Telemetry.js"
import type * as Args from "./Args.js"
import * as Backstop from "./Backstop.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"

const options: Args.Spec = { ...Command.common, port: "string", host: "string", memory: "boolean", cluster: "boolean" }

/** Serves until interrupted (a signal): exit code 0 after a graceful shutdown, 1 when the server cannot start. */
export const serve: Command.Command = {
  name: "serve",
  options,
  // A signal is how a server is meant to stop: a graceful shutdown is a success.
  interruptedCode: 0,
  help: [
    "Usage: corral serve [--port N] [--host H] [--memory] [--cluster] [--config FILE]",
    "",
    "Starts the HTTP server on the configured store (embedded PGlite under ./.corral by default) and runs until",
    "SIGTERM or SIGINT, then shuts down gracefully: new requests are refused, running bursts are cancelled with",
    "their transcripts kept and land a report, the store is closed, and the process exits 0.",
    "",
    "With no providers configured the scripted `demo` agent still runs: open http://127.0.0.1:8787/ui.",
    "",
    "Telemetry: set OTEL_EXPORTER_OTLP_ENDPOINT to export traces and metrics (OTLP/HTTP); Prometheus text is at",
    "/metrics either way. Logs are JSON lines when stdout is not a terminal (CORRAL_LOG_FORMAT).",
    "",
    "Cluster mode (--cluster): this node is one runner of a cluster of nodes sharing the Postgres database at",
    "DATABASE_URL (required: it refuses to start on the embedded or memory store). Sessions are spread over the",
    "runners; any node answers any request and routes its messages to the session's owner, and event streams",
    "follow a session from any node. Each node needs its own runner address (CORRAL_CLUSTER_HOST, reachable by the",
    "other nodes, and CORRAL_CLUSTER_PORT). When a node dies, its sessions move to the others within seconds: a",
    "dead process at the next health check, a machine cut off from Postgres once its heartbeat is three",
    "CORRAL_CLUSTER_HEALTH_CHECK_MS periods old (its connections are then ended, which needs superuser or",
    "pg_signal_backend); a burst it was running is interrupted and resumes with a follow-up. See docs/cluster.md.",
    "",
    "Options:",
    "  --port N        port to listen on (0 = any free port; also CORRAL_PORT)",
    "  --host H        interface to listen on (also CORRAL_HOST; 127.0.0.1 while no API keys are configured)",
    "  --memory        keep everything in memory (also CORRAL_STORE=memory)",
    "  --cluster       run as a node of a cluster on DATABASE_URL (also CORRAL_CLUSTER=true)",
    Command.commonHelp
  ].join("\n"),
  run: (args) =>
    Command.settings(args, [
      ["CORRAL_PORT", args.strings.get("port")],
      ["CORRAL_HOST", args.strings.get("host")],
      ["CORRAL_STORE", args.booleans.has("memory") ? "memory" : undefined],
      ["CORRAL_CLUSTER", args.booleans.has("cluster") ? "true" : undefined]
    ]).pipe(
      // The shutdown keeps its own bound (drain + 2 s to close the layers); the backstop waits beyond it.
      Effect.tap((settings) => Effect.sync(() => Backstop.atLeast(settings.server.shutdownTimeoutMs + 12_000))),
      // Telemetry (OTLP export, only when configured) and the log format wrap the whole server, shutdown included.
      Effect.flatMap((settings) =>
        Main.serve(settings).pipe(
          Effect.provide(Telemetry.layer(settings.telemetry)),
          Effect.provide(Logs.layer(settings.telemetry.logFormat, process.stdout.isTTY === true))
        )
      ),
      Effect.as(0),
      Effect.catchAll((error) => Effect.as(Output.error(`corral serve: ${Failure.describe(error)}`), 1))
    )
}

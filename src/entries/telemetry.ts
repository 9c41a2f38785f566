/**
 * `corral/telemetry` as Node loads it from the package: src/telemetry.ts behind `load`, so that a program without
 * the OpenTelemetry packages (optional peers) is told, when it imports the entry, every package that is missing and
 * the line that installs them — not when the layer is first built. The types are src/telemetry.ts's (package.json
 * `exports`); test/entries/OptionalPeers.test.ts keeps the names equal.
 */
import { load } from "../internal/optionalPeers.js"

const entry = await load("corral/telemetry", () => import("../telemetry.js"))

export const { Telemetry, Tracing } = entry

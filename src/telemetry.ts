/**
 * `corral/telemetry` — OTLP/HTTP export of Corral's traces and metrics for an embedded Corral, the way `corral serve`
 * exports them: `Telemetry.layer(settings)`, `Telemetry.layerConfig` (the standard `OTEL_*` variables),
 * `Telemetry.flush`; and `Tracing`, the switch for Corral's own spans (also in `corral`).
 *
 * An entry of its own because the OpenTelemetry SDK is ten optional peer packages that an embed without telemetry
 * should neither install nor load (`corral` needs none of them): importing this entry without them fails with one
 * error naming each missing package and the install line. The SDK itself is still loaded only when `layer` is built
 * with an endpoint.
 */

/** The exporting layer (`layer`, `layerConfig`, `settingsConfig`, `defaults`), `flush` and the OTLP URL helper. */
export * as Telemetry from "./telemetry/Telemetry.js"
/** Whether Corral makes spans: off unless turned on (`Tracing.layer(true)`); `Telemetry.layer` turns it on. */
export * as Tracing from "./telemetry/Tracing.js"

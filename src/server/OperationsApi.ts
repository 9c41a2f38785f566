/**
 * OperationsApi — what the operations page (`/ui/ops`) needs and no other route tells: each model provider's state
 * as this process's storm guard sees it (`GET /v1/providers`: healthy, throttled until the gate reopens, circuit
 * open), and how the bursts of the last hour ended (`GET /v1/exits`). Everything else on that page comes from
 * routes that exist (`/metrics`, `GET /v1/tools`, the session listing).
 *
 * Both are read-only views of process state, behind the same bearer keys as every `/v1` route. Provider names,
 * states and counts are configuration and numbers, never content; the exit counts are the process's (the
 * `corral.bursts` metric, which `/metrics` serves to anyone), not one org's. The contract lives here and the
 * handlers in `OperationsHandlers`, so that `Api.ts` only adds the group.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ExitReason } from "../domain/ExitReason.js"
import { Authentication } from "./Authentication.js"

/**
 * A provider's state: `healthy` (attempts pass), `throttled` (a storm: attempts wait at the gate until `gateUntil`,
 * then leave at a paced rate), `circuit_open` (attempts fail at once until `openUntil`), or `unguarded` (a provider
 * without a storm guard, such as the scripted demo model: nothing to tell).
 */
export const ProviderState = Schema.Literal("healthy", "throttled", "circuit_open", "unguarded")
export type ProviderState = typeof ProviderState.Type

/** One configured provider. */
export const ProviderInfo = Schema.Struct({
  name: Schema.String,
  model: Schema.String,
  /** The tiers that route to it. */
  tiers: Schema.Array(Schema.String),
  state: ProviderState,
  /** While throttled: when the gate reopens (ISO 8601); attempts leave at `rate` per second after it. */
  gateUntil: Schema.optional(Schema.String),
  /** While the circuit is open: until when (ISO 8601). */
  openUntil: Schema.optional(Schema.String),
  /** Releases per second the gate allows now. */
  rate: Schema.optional(Schema.Number),
  /** Attempts waiting at the gate now. */
  waiting: Schema.optional(Schema.Int),
  consecutiveFailures: Schema.optional(Schema.Int),
  /** Since the process started: storms begun, attempts that waited, circuit openings, attempts failed fast. */
  storms: Schema.optional(Schema.Int),
  gated: Schema.optional(Schema.Int),
  opened: Schema.optional(Schema.Int),
  rejected: Schema.optional(Schema.Int)
}).annotations({ identifier: "ProviderInfo" })
export type ProviderInfo = typeof ProviderInfo.Type

/** The answer of `GET /v1/providers`. */
export const ProvidersView = Schema.Struct({
  /** When the states were read (ISO 8601). */
  at: Schema.String,
  providers: Schema.Array(ProviderInfo)
}).annotations({ identifier: "ProvidersView" })
export type ProvidersView = typeof ProvidersView.Type

/** The answer of `GET /v1/exits`: bursts ended in this process over the window, by exit reason. */
export const ExitsView = Schema.Struct({
  /** The start of the window counted (ISO 8601): an hour ago, or the process's start when that is later. */
  from: Schema.String,
  to: Schema.String,
  /** Every exit reason, with the bursts that ended with it in the window (0 included). */
  byReason: Schema.Record({ key: ExitReason, value: Schema.Int }),
  total: Schema.Int
}).annotations({ identifier: "ExitsView" })
export type ExitsView = typeof ExitsView.Type

/** Operations: provider states and recent exits. */
export class OperationsGroup extends HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.get("listProviders", "/v1/providers")
      .addSuccess(ProvidersView)
      .annotate(
        OpenApi.Summary,
        "Every configured model provider and its state now: healthy, throttled (with the gate's release time), " +
          "circuit open"
      )
  )
  .add(
    HttpApiEndpoint.get("recentExits", "/v1/exits")
      .addSuccess(ExitsView)
      .annotate(OpenApi.Summary, "Bursts ended in this process over the last hour, by exit reason")
  )
  .middleware(Authentication)
  .annotate(OpenApi.Description, "The state of the process around the sessions, for the operations page")
{}

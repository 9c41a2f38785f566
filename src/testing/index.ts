/**
 * `corral/testing` — the test kit: a scripted model, fault helpers, arbitraries, and a one-call runner that plays a
 * spec against a script under the TestClock.
 */
/** A `ModelProvider` that plays a fixed list of steps (replies, faults, delays on the Effect clock): `make`, the step builders. */
export * as ScriptedModel from "../model/Scripted.js"
/** fast-check arbitraries of model behaviour: replies of every shape and provider faults of every kind. */
export * as Arbitraries from "./Arbitraries.js"
/**
 * The fast-check the arbitraries are built on: Effect's bundled copy (fast-check 3). Use this one (`FastCheck as
 * fc`) for overrides and your own properties: `fast-check` 4 from npm has other types and does not fit (TS2739).
 */
export { FastCheck } from "effect"
/** A spec against a script in one call: the in-memory `layer`, `runBurst`, `drive`. */
export * as Harness from "./Harness.js"
export { replay } from "./replay.js"
export type { BurstResult, Divergence, Options as ReplayOptions } from "./replay.js"
/** Replays every session a test suite stored: `trackMemoryStores`, `verifyStores`. */
export * as ReplayStored from "./replayStored.js"
export { runScript } from "./runScript.js"
export type {
  Approve,
  Continue,
  Landed,
  Message,
  Options as RunScriptOptions,
  Outcome,
  Refused,
  Run,
  SessionOptions,
  SessionRun,
  Skipped
} from "./runScript.js"

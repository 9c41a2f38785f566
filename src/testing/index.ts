/**
 * `corral/testing` — the test kit: a scripted model, fault helpers, arbitraries, and a one-call runner that plays a
 * spec against a script under the TestClock.
 */
export * as ScriptedModel from "../model/Scripted.js"
export * as Arbitraries from "./Arbitraries.js"
export * as Harness from "./Harness.js"
export { replay } from "./replay.js"
export type { BurstResult, Divergence, Options as ReplayOptions } from "./replay.js"
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

/**
 * `replay(run)`: re-runs a burst the test kit ran (or any stored burst) against its own record and says whether the
 * rails decide the same way again (`session/Replay`): `Verified`, `Skipped` with the reason, or `Diverged` with the
 * path of the first difference.
 */
import type { Effect } from "effect"
import * as Replay from "../session/Replay.js"
import type { BurstRun } from "./Harness.js"

/** Replays `run` (a `runScript` / `Harness.runBurst` result, or a stored burst with its spec and transcript). */
export const replay = (
  run: Pick<BurstRun, "spec" | "session" | "turns" | "trajectory">,
  options: Replay.Options = {}
): Effect.Effect<Replay.BurstResult> =>
  Replay.verifyBurst(
    { spec: run.spec, session: run.session, turns: run.turns, trajectory: run.trajectory, last: true },
    options
  )

export type { BurstResult, Divergence, Options } from "../session/Replay.js"

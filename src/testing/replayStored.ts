/**
 * Replaying everything a test suite stored: `trackMemoryStores` remembers every in-memory store made while it is on,
 * and `verifyTracked` replays every session in them (`session/Replay`), so a suite proves that each burst it ran ends
 * where the rails say it must — not only the bursts a test asserted on.
 */
import { Effect, Option } from "effect"
import type { Context } from "effect"
import type { Session } from "../domain/Session.js"
import * as Replay from "../session/Replay.js"
import * as MemoryStore from "../store/MemoryStore.js"
import { SessionStore } from "../store/SessionStore.js"

/** What a replay of stored sessions found. */
export interface Summary {
  readonly sessions: number
  readonly verified: number
  readonly skipped: ReadonlyArray<{ readonly sessionId: string; readonly runId: string; readonly why: string }>
  readonly diverged: ReadonlyArray<{ readonly sessionId: string; readonly divergence: Replay.Divergence }>
}

interface Tracked {
  readonly store: Context.Tag.Service<SessionStore>
  readonly sessions: () => ReadonlyArray<Session>
}

/** Starts remembering every memory store made from now on. Returns the stores seen so far and a stop function. */
export const trackMemoryStores = (): { readonly stores: ReadonlyArray<Tracked>; readonly stop: () => void } => {
  const stores: Array<Tracked> = []
  const stop = MemoryStore.track((store, sessions) => stores.push({ store, sessions }))
  return { stores, stop }
}

/** Replays every session of every store; a session whose agent spec is not stored is skipped (and said so). */
export const verifyStores = (stores: ReadonlyArray<Tracked>, options: Replay.Options = {}): Effect.Effect<Summary> =>
  Effect.gen(function*() {
    let sessions = 0
    let verified = 0
    const skipped: Array<Summary["skipped"][number]> = []
    const diverged: Array<Summary["diverged"][number]> = []
    for (const { sessions: all, store } of stores) {
      for (const session of all()) {
        // A session without a burst (a store test's row) has nothing to replay.
        if ((yield* Effect.orDie(store.trajectories(session.principal.orgId, session.id))).length === 0) continue
        sessions += 1
        const loaded = yield* Replay.load(session.principal.orgId, session.id).pipe(
          Effect.provideService(SessionStore, store),
          Effect.option
        )
        if (Option.isNone(loaded)) {
          skipped.push({ sessionId: session.id, runId: "", why: "its agent spec is not stored" })
          continue
        }
        for (const result of yield* Replay.verifySession(loaded.value, options)) {
          if (result._tag === "Verified") verified += 1
          else if (result._tag === "Skipped") {
            skipped.push({ sessionId: session.id, runId: result.runId, why: result.why })
          } else diverged.push({ sessionId: session.id, divergence: result.divergence })
        }
      }
    }
    return { sessions, verified, skipped, diverged }
  })

/** A divergence in words: where, what the record says, what the replay did. */
export const describe = (sessionId: string, d: Replay.Divergence): string =>
  `session ${sessionId} burst ${d.runId}: ${d.path}\n  recorded: ${JSON.stringify(d.recorded)}\n  replayed: ${
    JSON.stringify(d.replayed)
  }`

/**
 * MemoryStore — the `SessionStore` port over plain Maps, for tests, the demo and the all-in-memory runtime.
 *
 * Every method runs as one synchronous step: JavaScript is single threaded and nothing yields between reading the
 * last sequence number and writing the next, so concurrent `appendTurn`s on one session can never share or skip a
 * number. Memory per session is one record, the turn entries exactly as appended with their times beside them, and
 * the trajectories, closed ones packed once the session holds two (the benchmark holds 10,000 sessions of 20 turns:
 * no copies, no per-turn indexes). Because sequence numbers start at 1 with no gaps, a turn's index in the arrays is
 * `seq - 1`, which makes "turns after seq N" a slice.
 *
 * `makeMemory` assembles the store from parts over one state record (internal/memoryState.ts): agents, sessions and
 * the mailbox (memorySessions.ts), transcripts and trajectories (memoryTranscripts.ts), approvals and spend
 * (memoryRecords.ts).
 */
import { Effect, Layer } from "effect"
import type { Context } from "effect"
import type { Session } from "../domain/Session.js"
import * as MemoryRecords from "./internal/memoryRecords.js"
import * as MemorySessions from "./internal/memorySessions.js"
import * as MemoryState from "./internal/memoryState.js"
import * as MemoryTranscripts from "./internal/memoryTranscripts.js"
import { SessionStore } from "./SessionStore.js"

/**
 * A fresh, empty in-memory store. Never fails to build; its methods fail with `PersistenceFailed` only for a
 * duplicate session id or a write to a session that does not exist, and `inheritArtifact` with `ScopeMismatch`
 * across orgs or scopes.
 */
export const makeMemory: Effect.Effect<Context.Tag.Service<SessionStore>> = Effect.sync(() => {
  const state = MemoryState.make()
  const service: Context.Tag.Service<SessionStore> = {
    ...MemorySessions.agents(state),
    ...MemorySessions.sessions(state),
    ...MemorySessions.inbox(state),
    ...MemoryTranscripts.transcripts(state),
    ...MemoryTranscripts.trajectories(state),
    ...MemoryRecords.approvals(state),
    ...MemoryRecords.spend(state)
  }
  for (const listener of listeners) listener(service, () => [...state.sessions.values()].map((r) => r.session))
  return service
})

/** A memory store as `track` hands it over: the store, and every session it holds (of every org). */
export type Tracked = (store: Context.Tag.Service<SessionStore>, sessions: () => ReadonlyArray<Session>) => void

const listeners = new Set<Tracked>()

/**
 * Calls `listener` with every memory store made from now on (the test kit replays every session a test suite
 * stores this way). Returns the function that stops it.
 */
export const track = (listener: Tracked): () => void => {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

/** The in-memory `SessionStore`; each build of the layer starts empty. */
export const layerMemory: Layer.Layer<SessionStore> = Layer.effect(SessionStore, makeMemory)

/**
 * AgentFeed — tells Corral's MCP connections that an org published an agent, so each connection of that org sends
 * its host `notifications/tools/list_changed` (its `run_<agent>` tools changed) instead of the host showing a stale
 * list until it reconnects.
 *
 * In-process only: the wiring decorates `Corral.publishAgent` (the HTTP API, `corral agents publish` against a
 * server, and embedders all publish through it). An agent published by another process on the same database is
 * not announced; the host sees it at its next `tools/list`. Listeners are plain callbacks run synchronously and must
 * only take note (the MCP connection sends a notification and never waits for it).
 */
import { Context, Layer } from "effect"

/** The feed: announce a publication, or listen to one org's. */
export interface Service {
  /** Tells every listener of `orgId`. Never fails. */
  readonly published: (orgId: string) => void
  /** Calls `onPublished` after each publication of `orgId`; returns what stops it (idempotent). */
  readonly listen: (orgId: string, onPublished: () => void) => () => void
}

/** The feed of agent publications (optional: without it, connections never announce a change). */
export class AgentFeed extends Context.Tag("corral/server/mcp/AgentFeed")<AgentFeed, Service>() {}

/** A feed in memory. */
export const make = (): Service => {
  const listeners = new Map<string, Set<() => void>>()
  return {
    published: (orgId) => {
      for (const listener of listeners.get(orgId) ?? []) {
        try {
          listener()
        } catch {
          // A listener's failure is its own: the publication stands and the others are told.
        }
      }
    },
    listen: (orgId, onPublished) => {
      const set = listeners.get(orgId) ?? new Set()
      listeners.set(orgId, set)
      set.add(onPublished)
      return () => {
        set.delete(onPublished)
        if (set.size === 0 && listeners.get(orgId) === set) listeners.delete(orgId)
      }
    }
  }
}

/** `make` as a layer. */
export const layer: Layer.Layer<AgentFeed> = Layer.sync(AgentFeed, make)

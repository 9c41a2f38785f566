/**
 * corralPorts — what the parts of the `Corral` service (src/Corral.ts) share: the ports and settings `Corral.make`
 * yields once, the request decoders, the idempotency lookups, and the reads every method starts with (`load`,
 * `getAgent`). Each part (corralPublish.ts, corralAccept.ts) is a module of plain functions taking this record, so the
 * service is assembled from them rather than being one closure.
 *
 * The parts live beside the session modules they drive: the `Corral` service sits one layer above `session/`, and a
 * part imports only from `session/` and below.
 */
import { Effect, Option } from "effect"
import type { Context, ParseResult } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import type { FieldIssue, PersistenceFailed } from "../../domain/Errors.js"
import { AgentNotFound, fieldIssues, InvalidRequest, SessionNotFound } from "../../domain/Errors.js"
import type { AgentId, SessionId } from "../../domain/Ids.js"
import type { Principal } from "../../domain/Principal.js"
import type { Scope } from "../../domain/Scope.js"
import type { Session } from "../../domain/Session.js"
import type { Retriever } from "../../knowledge/Retriever.js"
import type { Providers } from "../../model/ModelProvider.js"
import type * as ExitPolicy from "../../rails/ExitPolicy.js"
import type * as Limits from "../../rails/Limits.js"
import type * as OrgBudget from "../../rails/OrgBudget.js"
import type { SessionStore } from "../../store/SessionStore.js"
import type { ToolExecutor } from "../../tools/ToolExecutor.js"
import type { Ids } from "../Ids.js"
import type * as Supervisor from "../Supervisor.js"
import type * as Idempotency from "./idempotency.js"

/** A start request as decoded (`Corral.StartRequest`). */
export interface StartInput {
  readonly agentId: AgentId
  readonly version?: number | undefined
  readonly scope: Scope
  readonly prompt: string
  readonly inheritedArtifacts?: ReadonlyArray<SessionId> | undefined
  readonly sessionId?: SessionId | undefined
}

/** Options of the calls that accept a message (`Corral.SendOptions`). */
export interface SendOptions {
  readonly idempotencyKey?: string
}

/** The shared record of the service's parts. */
export interface Ports {
  readonly store: Context.Tag.Service<SessionStore>
  readonly executor: Context.Tag.Service<ToolExecutor>
  readonly providers: Context.Tag.Service<Providers>
  readonly supervisor: Supervisor.Service
  /** The host's ceilings. */
  readonly ceiling: Context.Tag.Service<Limits.Limits>
  readonly hostPolicy: Context.Tag.Service<ExitPolicy.Policy>
  readonly ids: Context.Tag.Service<Ids>
  readonly retriever: Option.Option<Context.Tag.Service<Retriever>>
  readonly orgBudgets: Context.Tag.Service<OrgBudget.OrgBudgets>
  readonly decodeSpec: (input: unknown) => Effect.Effect<AgentSpec, ParseResult.ParseError>
  readonly decodeStart: (input: unknown) => Effect.Effect<StartInput, ParseResult.ParseError>
  readonly earlier: ReturnType<typeof Idempotency.make>["earlier"]
  readonly replay: ReturnType<typeof Idempotency.make>["replay"]
}

/** The field issues of a failed decode, their paths under `prefix`. */
export const issuesOf = (error: ParseResult.ParseError, prefix = ""): ReadonlyArray<FieldIssue> =>
  fieldIssues(error, { prefix: [prefix] })

/** An `InvalidRequest` with its issues. */
export const invalid = (message: string, issues: ReadonlyArray<FieldIssue>) => new InvalidRequest({ message, issues })

/** The given version of an agent of the caller's org, or its latest; `AgentNotFound` otherwise. */
export const getAgent = (
  ports: Ports,
  by: Principal,
  agentId: string,
  version?: number
): Effect.Effect<AgentSpec, AgentNotFound | PersistenceFailed> =>
  Effect.flatMap(ports.store.getAgent(by.orgId, agentId, version), (found) =>
    Option.match(found, {
      onNone: () => Effect.fail(new AgentNotFound({ agentId, ...(version === undefined ? {} : { version }) })),
      onSome: Effect.succeed
    }))

/** The session as its live actor holds it, else as stored; `SessionNotFound` for another org's session too. */
export const load = (ports: Ports, by: Principal, sessionId: string) =>
  Effect.flatMap(
    Effect.suspend(() => {
      const live = ports.supervisor.peek(by.orgId, sessionId)
      return Option.isSome(live) ? Effect.succeed(live) : ports.store.getSession(by.orgId, sessionId)
    }),
    (found) =>
      Option.match(found, {
        onNone: () => Effect.fail(new SessionNotFound({ sessionId })),
        onSome: (session): Effect.Effect<Session> => Effect.succeed(session)
      })
  )

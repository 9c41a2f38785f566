/**
 * Sessions as @effect/cluster entities: the same actor, hosted on whichever runner owns the session's shard.
 *
 * The entity is a thin host, not a second actor. Its handlers hand each message to this runner's `Supervisor`
 * (built with `hosting: "cluster"`), so one module — `SessionActor` under `Supervisor` — is the behaviour of a
 * session in both hostings: one message at a time, a fiber only while messages wait, passivation when idle, state
 * rebuilt from the store on first use (entity memory is lost when a shard moves; the store never is).
 *
 * `Run`, `Continue` and `Approve` are persisted (the cluster stores them in Postgres before they are delivered, and
 * delivers them again to the next owner when their runner dies before answering). `Run` and `Continue` are keyed by
 * the accepted message id, so a message sent twice is stored once. `Approve` is keyed by a fresh id per call: a
 * second decision with the same token must reach the actor and be refused `AlreadyDecided` (naming the decision that
 * stands), as it is locally — the store's single-use token, not the cluster, keeps a decision from running twice. A
 * delivery after a runner died may find the message already run (its burst stored the user turn before the runner died): the supervisor
 * then answers the session as it stands and does not run it again. `Cancel`, `Landed` and `Renew` are volatile:
 * they only mean something to a live burst or a live person, and a burst whose runner died is already over
 * (`interrupted` when the next owner loads it).
 *
 * The entity runs its handlers concurrently (the actor's mailbox serialises the messages that must be serial), so a
 * `Cancel` reaches a running burst instead of queueing behind it. When the entity stops on this runner (its shard
 * moves, or it passivates) the local actor is released: queued messages are refused (the cluster delivers them
 * again where the session now lives), the running burst is cancelled and landed within the entity's termination time.
 *
 * No approval token is ever in the cluster's tables (a token is a bearer secret; the store keeps only its hash): a
 * persisted `Approve` carries the token's hash, and a persisted message's answer says only whether its burst issued
 * tokens (`Answer`) — the sending node then fetches them with a `Renew`, which is volatile.
 *
 * `Wake` is volatile too: the runner's sweep (cluster/Sweep) sends it to sessions of its own shards that no message
 * will reach (an accepted message the cluster never stored, a session left `running` whose message the cluster holds
 * as answered); the owner runs what waits in the session's inbox and recovers the session by loading it.
 *
 * `layer` gives the `Supervisor` the `Corral` service talks to: every call goes through the entity client to the
 * owning runner (this one or another), so any node answers any request. It also runs the sweep.
 */
import { ClusterSchema, Entity, EntityId, ShardId, Sharding, ShardingConfig } from "@effect/cluster"
import { Rpc } from "@effect/rpc"
import { Duration, Effect, Layer, Option, Schema } from "effect"
import { AlreadyDecided, InvalidSessionState, PersistenceFailed, SessionNotFound } from "../domain/Errors.js"
import { Session } from "../domain/Session.js"
import { Ids } from "../session/Ids.js"
import type * as SessionActor from "../session/SessionActor.js"
import * as Supervisor from "../session/Supervisor.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Fence from "./Fence.js"
import * as Route from "./internal/route.js"
import * as Sweep from "./Sweep.js"

/** An approval token as issued by a burst (shown once to the session's user). */
const IssuedToken = Schema.Struct({ callId: Schema.String, token: Schema.String, expiresAt: Schema.Number })

/** What `Renew` answers (volatile, never stored): the session as it stands, and the fresh tokens it issued. */
export const Reply = Schema.Struct({ session: Session, tokens: Schema.Array(IssuedToken) })

/**
 * What processing a persisted message answers: the session as it stands after it, and whether the burst issued
 * approval tokens — not the tokens. The cluster stores this answer in `cluster_replies`, and a token is a bearer
 * secret (the store keeps only its hash): the sending node fetches the tokens with a `Renew`, which is volatile,
 * revoking the unseen ones the burst issued.
 */
export const Answer = Schema.Struct({ session: Session, issued: Schema.Boolean })

const answerOf = (reply: SessionActor.Reply): typeof Answer.Type => ({
  session: reply.session,
  issued: reply.tokens.length > 0
})

/** The failures a session message can end with: `SendError` (domain/Errors), on the wire. */
export const Failure = Schema.Union(PersistenceFailed, InvalidSessionState, AlreadyDecided, SessionNotFound)

const Principal = Schema.Struct({ orgId: Schema.String, userId: Schema.String })
const Note = Schema.Struct({ code: Schema.String, message: Schema.String })

/** The first prompt of a session, by its accepted message id (`InboxMessage.id`). */
export const Run = Rpc.make("Run", {
  payload: {
    orgId: Schema.String,
    inboxId: Schema.String,
    text: Schema.String,
    context: Schema.optional(Schema.String),
    notes: Schema.optional(Schema.Array(Note))
  },
  success: Answer,
  error: Failure,
  primaryKey: (payload) => payload.inboxId
}).annotate(ClusterSchema.Persisted, true)

/** A follow-up, by its accepted message id. */
export const Continue = Rpc.make("Continue", {
  payload: { orgId: Schema.String, inboxId: Schema.String, text: Schema.String },
  success: Answer,
  error: Failure,
  primaryKey: (payload) => payload.inboxId
}).annotate(ClusterSchema.Persisted, true)

/** A person's decision on a pending write, keyed by the call (`requestId`). */
export const Approve = Rpc.make("Approve", {
  payload: {
    orgId: Schema.String,
    requestId: Schema.String,
    by: Principal,
    /** The token's SHA-256, never the token: this message is stored in `cluster_messages`. */
    tokenHash: Schema.String,
    decision: Schema.Literal("approve", "reject")
  },
  success: Answer,
  error: Failure,
  primaryKey: (payload) => payload.requestId
}).annotate(ClusterSchema.Persisted, true)

/** Fresh approval tokens for the writes still waiting. */
export const Renew = Rpc.make("Renew", {
  payload: { orgId: Schema.String, by: Principal },
  success: Reply,
  error: Failure
})

/** Signals the running burst to stop; `true` when one was running on the owner. */
export const Cancel = Rpc.make("Cancel", { payload: { orgId: Schema.String }, success: Schema.Boolean })

/** Completes when the owner's running burst has landed (at once when none runs). */
export const Landed = Rpc.make("Landed", { payload: { orgId: Schema.String } })

/**
 * Wakes the session on its owner (cluster/Sweep): runs the accepted messages that never reached it, oldest first,
 * and recovers it if it was left `running` with no live actor. Volatile: the sweep sends it again next round.
 */
export const Wake = Rpc.make("Wake", { payload: { orgId: Schema.String } })

/** The session entity: entity id = session id. */
export const SessionEntity = Entity.make("CorralSession", [Run, Continue, Approve, Renew, Cancel, Landed, Wake])

/** How long a stopping entity waits for its burst to land (under the cluster's 15 s entity termination timeout). */
const releaseWait = Duration.seconds(10)

/** The entity's handlers over this runner's supervisor. */
export const handlers = (local: Supervisor.Service) =>
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const sessionId = address.entityId
    const store = yield* SessionStore
    const ids = yield* Ids
    yield* Effect.addFinalizer(() =>
      local.release(sessionId).pipe(
        Effect.timeout(releaseWait),
        Effect.catchAll(() => Effect.logWarning(`session ${sessionId}: its burst did not land within ${releaseWait}`))
      )
    )
    const send = (orgId: string, message: SessionActor.Message) => local.send(orgId, sessionId, message)
    return SessionEntity.of({
      Run: ({ payload }) =>
        Effect.map(
          send(payload.orgId, {
            _tag: "Run",
            text: payload.text,
            inboxId: payload.inboxId,
            ...(payload.context === undefined ? {} : { context: payload.context }),
            ...(payload.notes === undefined ? {} : { notes: payload.notes })
          }),
          answerOf
        ),
      Continue: ({ payload }) =>
        Effect.map(send(payload.orgId, { _tag: "Continue", text: payload.text, inboxId: payload.inboxId }), answerOf),
      Approve: ({ payload }) =>
        Effect.map(
          send(payload.orgId, {
            _tag: "Approve",
            by: payload.by,
            tokenHash: payload.tokenHash,
            decision: payload.decision
          }),
          answerOf
        ),
      Renew: ({ payload }) => send(payload.orgId, { _tag: "Renew", by: payload.by }),
      Cancel: ({ payload }) =>
        local.peek(payload.orgId, sessionId).pipe(
          Option.match({ onNone: () => Effect.succeed(false), onSome: () => local.cancel(payload.orgId, sessionId) })
        ),
      Landed: ({ payload }) => local.landed(payload.orgId, sessionId),
      Wake: ({ payload }) =>
        Effect.gen(function*() {
          const waiting = yield* store.inbox(sessionId)
          if (waiting.length === 0) {
            // Nothing waits, but the session may have been left `running`: loading it recovers it (`interrupted`),
            // as the supervisor recovers any session it loads in that state. A message id nobody accepted is never
            // run by the cluster-hosted supervisor (it runs only accepted messages still waiting), so this only loads
            // the session — or finds its live actor, which is left alone.
            yield* local.send(payload.orgId, sessionId, { _tag: "Continue", text: "", inboxId: ids.messageId() })
            return
          }
          // One after the other, in the order accepted; one that already ran (or runs now) is not run again. A refusal
          // (a follow-up while a write waits) is the message's answer, as it would have been on delivery.
          for (const message of waiting) {
            yield* local.send(message.orgId, sessionId, Supervisor.fromInbox(message)).pipe(
              Effect.catchIf(
                (error) => error._tag !== "PersistenceFailed",
                (refused) =>
                  Effect.logInfo(`session ${sessionId}: accepted message ${message.id} refused: ${refused.message}`)
              )
            )
          }
        }).pipe(
          Effect.catchAll((error) => Effect.logWarning(`session ${sessionId}: not woken: ${error.message}`))
        )
    })
  })

/** Options of `layer`: the local supervisor's (hosting is always `"cluster"`), and the sweep's period. */
export interface Options extends Omit<Supervisor.Options, "hosting"> {
  /**
   * How often this runner sweeps the sessions of its shards that nothing else will wake (cluster/Sweep), and how
   * old an accepted message must be before the sweep delivers it. Default 30 seconds.
   */
  readonly sweepInterval?: Duration.DurationInput
}

/**
 * Registers the session entity on this runner (its handlers over a local supervisor) and provides the routing
 * `Supervisor`: `send`, `cancel` and `landed` go through the entity client to the session's owner; `peek` is empty
 * (readers read the store, which the owner writes before it answers); `live`, `admission` and `running` describe
 * this runner's own actors. Fails only if the local supervisor cannot start.
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Supervisor.Supervisor, PersistenceFailed, Sharding.Sharding | SessionActor.Requirements> =>
  Layer.scoped(
    Supervisor.Supervisor,
    Effect.gen(function*() {
      const { sweepInterval, ...supervisorOptions } = options
      const scope = yield* Effect.scope
      const sharding = yield* Sharding.Sharding
      const groups = Option.match(yield* Effect.serviceOption(ShardingConfig.ShardingConfig), {
        onNone: () => ["default"] as ReadonlyArray<string>,
        onSome: (config) => config.availableShardGroups
      })
      // This runner's actors write through the fence (cluster/Fence, when the node has one): nothing for a session
      // whose shard lock this node may have lost.
      const lockOfSession = (sessionId: string) => {
        const entityId = EntityId.make(sessionId)
        return Fence.lockOf(groups, sharding.getShardId(entityId, SessionEntity.getShardGroup(entityId)))
      }
      const local = yield* Effect.flatMap(SessionStore, (store) => Fence.guarded(store, lockOfSession)).pipe(
        Effect.flatMap((store) =>
          Effect.provideService(Supervisor.make({ ...supervisorOptions, hosting: "cluster" }), SessionStore, store)
        )
      )
      const idle = Duration.decode(options.idleTimeout ?? Duration.minutes(5))
      yield* Layer.buildWithScope(
        SessionEntity.toLayer(handlers(local), { concurrency: "unbounded", maxIdleTime: idle }),
        yield* Effect.scope
      )
      const client = yield* SessionEntity.client
      const ids = yield* Ids
      // The cluster's shard count (its default when no config is in context); every session is in one group.
      const shardsPerGroup = Option.match(yield* Effect.serviceOption(ShardingConfig.ShardingConfig), {
        onNone: () => 300,
        onSome: (config) => config.shardsPerGroup
      })
      const group = SessionEntity.getShardGroup(EntityId.make("any"))
      yield* Effect.forkScoped(Sweep.run({
        local,
        wake: (sessionId, orgId) => client(sessionId).Wake({ orgId }, { discard: true }),
        owns: (sessionId) => {
          const entityId = EntityId.make(sessionId)
          return sharding.hasShardId(sharding.getShardId(entityId, SessionEntity.getShardGroup(entityId)))
        },
        every: sweepInterval ?? Duration.seconds(30),
        shards: {
          of: (sessionId) => {
            const entityId = EntityId.make(sessionId)
            return sharding.getShardId(entityId, SessionEntity.getShardGroup(entityId)).toString()
          },
          owned: () => {
            const out = new Set<string>()
            for (let id = 1; id <= shardsPerGroup; id++) {
              const shard = ShardId.make(group, id)
              if (sharding.hasShardId(shard)) out.add(shard.toString())
            }
            return out
          }
        }
      }))
      return Route.make({ local, client, ids, scope })
    })
  )

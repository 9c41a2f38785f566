/**
 * Idempotency keys: a client that did not hear the answer to a POST (a cut connection, a timeout) sends it again
 * with the same `Idempotency-Key` and must get the first answer back, with nothing created twice. The key is scoped
 * to the org; the request's fingerprint is stored with it so that reusing a key for a DIFFERENT request is refused
 * (answering it with another request's outcome would be a silent lie).
 */
import { Effect, Option } from "effect"
import { createHash } from "node:crypto"
import type { PersistenceFailed } from "../../domain/Errors.js"
import { FieldIssue, InvalidRequest } from "../../domain/Errors.js"
import type { IdempotencyRecord } from "../../domain/Inbox.js"
import type { Principal } from "../../domain/Principal.js"
import type { SessionView } from "../../domain/Session.js"
import type { SessionStore } from "../../store/SessionStore.js"

/** The longest key accepted (Stripe's limit; a UUID is 36). */
export const maxKeyLength = 255

/** Why `key` is not a usable idempotency key, or `undefined` when it is one (1–255 printable ASCII characters). */
export const keyProblem = (key: string): string | undefined =>
  key.length === 0 || key.length > maxKeyLength
    ? `must be 1 to ${maxKeyLength} characters long (got ${key.length})`
    : /^[\x21-\x7e]+$/.test(key)
    ? undefined
    : "must be printable ASCII without spaces (a UUID works)"

/** The key, validated: `InvalidRequest` naming the field otherwise. */
export const check = (key: string): InvalidRequest | undefined => {
  const problem = keyProblem(key)
  return problem === undefined ? undefined : new InvalidRequest({
    message: "the Idempotency-Key is invalid",
    issues: [new FieldIssue({ path: "Idempotency-Key", message: problem })]
  })
}

/** The SHA-256 of what a request asked for (its operation and its canonical JSON). */
export const fingerprint = (operation: string, request: unknown): string =>
  createHash("sha256").update(operation).update("\u0000").update(JSON.stringify(request)).digest("hex")

/** The refusal of a key reused for another request. */
export const reused = (key: string): InvalidRequest =>
  new InvalidRequest({
    message: "the Idempotency-Key was already used for a different request",
    issues: [
      new FieldIssue({
        path: "Idempotency-Key",
        message: `"${key.slice(0, 64)}" was first sent with another request; use a new key for a new request`
      })
    ]
  })

/** A retry found under its key: the first answer. */
export interface Replay {
  readonly _tag: "Replay"
  readonly first: IdempotencyRecord
}

/** The lookups of one store: `earlier` (the stored first answer under a key, the key validated first) and `replay`. */
export const make = (store: SessionStore["Type"]) => {
  /** The first record, if the request is the same one; `InvalidRequest` when the key was used for another. */
  const replay = (first: IdempotencyRecord, print: string): Effect.Effect<Replay, InvalidRequest> =>
    first.fingerprint === print ? Effect.succeed({ _tag: "Replay", first }) : Effect.fail(reused(first.key))

  const earlier = (
    by: Principal,
    key: string | undefined,
    print: string
  ): Effect.Effect<Option.Option<Replay>, InvalidRequest | PersistenceFailed> =>
    Effect.gen(function*() {
      if (key === undefined) return Option.none()
      const bad = check(key)
      if (bad !== undefined) return yield* bad
      const first = yield* store.findIdempotency(by.orgId, key)
      return Option.isNone(first) ? Option.none() : Option.some(yield* replay(first.value, print))
    })

  return { earlier, replay }
}

/** The `idempotency` part of a `SessionStore.accept` request: nothing without a key. */
export const record = (
  by: Principal,
  key: string | undefined,
  print: string,
  sessionId: string,
  answer: SessionView,
  now: number
): { readonly idempotency?: IdempotencyRecord } =>
  key === undefined ? {} : {
    idempotency: { orgId: by.orgId, key, fingerprint: print, sessionId, answer, createdAt: now }
  }

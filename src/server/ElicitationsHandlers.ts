/**
 * ElicitationsHandlers — the handler of `ElicitationsApi`: the session must be the caller's (another org's is a 404
 * like a missing one), then the open question is settled with the answer.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Corral } from "../Corral.js"
import { Api } from "./Api.js"
import { CurrentPrincipal } from "./Authentication.js"
import { Unavailable } from "./HttpErrors.js"
import { PendingElicitations } from "./PendingElicitations.js"

/** The `elicitations` group's handlers. Needs `Corral` and `PendingElicitations`. */
export const layer = HttpApiBuilder.group(Api, "elicitations", (handlers) =>
  Effect.gen(function*() {
    const corral = yield* Corral
    const pending = yield* PendingElicitations
    return handlers.handle("answerElicitation", ({ path, payload }) =>
      Effect.gen(function*() {
        const by = yield* CurrentPrincipal
        yield* corral.get(by, path.id).pipe(
          Effect.catchTag("PersistenceFailed", (error) =>
            Effect.zipRight(
              Effect.logError(`store failure in ${error.operation}: ${error.message}`),
              Effect.fail(new Unavailable({ message: "the store is unavailable; retry later" }))
            ))
        )
        yield* pending.answer(
          path.id,
          path.elicitationId,
          payload.action === "accept"
            ? { action: "accept", content: payload.content ?? {} }
            : { action: payload.action }
        )
      }))
  }))

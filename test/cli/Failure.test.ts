import { describe, expect, it } from "@effect/vitest"
import { Cause, Schema } from "effect"
import * as Failure from "../../src/cli/Failure.js"
import { FieldIssue, InvalidRequest, PersistenceFailed, SessionNotFound } from "../../src/domain/Errors.js"

// What another installed copy of the package would throw: recognised by `isCorralError`, so worded the same way.
class CopiedFieldIssue extends Schema.Class<CopiedFieldIssue>("FieldIssue")({
  path: Schema.String,
  message: Schema.String
}) {}
class CopiedInvalidRequest extends Schema.TaggedError<CopiedInvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  issues: Schema.Array(CopiedFieldIssue)
}) {}

describe("Failure.describe", () => {
  it("lists every field of a refused request, from this copy of the package or another", () => {
    const issues = [new FieldIssue({ path: "id", message: "required" }), new FieldIssue({ path: "tier", message: "?" })]
    const expected = "the agent spec is invalid:\n  - id: required\n  - tier: ?"
    expect(Failure.describe(new InvalidRequest({ message: "the agent spec is invalid", issues }))).toBe(expected)
    const copied = new CopiedInvalidRequest({
      message: "the agent spec is invalid",
      issues: issues.map((i) => new CopiedFieldIssue({ path: i.path, message: i.message }))
    })
    expect(Failure.describe(copied)).toBe(expected)
  })

  it("names the store operation of a store failure, and the tag of the other service failures", () => {
    expect(Failure.describe(new PersistenceFailed({ operation: "appendTurn", message: "timed out" })))
      .toBe("store failure (appendTurn): timed out")
    expect(Failure.describeCause(Cause.fail(new SessionNotFound({ sessionId: "ses_1" }))))
      .toBe("SessionNotFound: no session with this id is visible to you")
  })

  it("falls back to the message of anything else", () => {
    expect(Failure.describe(new Error("boom"))).toBe("boom")
    expect(Failure.describe({ _tag: "ConfigInvalid", message: "CORRAL_PORT: not a port" }))
      .toBe("ConfigInvalid: CORRAL_PORT: not a port")
    expect(Failure.describe("plain")).toBe("plain")
  })
})

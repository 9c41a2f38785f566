/**
 * The file's `telemetry` section as an operator writes it: a bad value is reported once, on its field.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Telemetry from "../../src/telemetry/Settings.js"

const issuesOf = (raw: unknown) =>
  Either.match(Telemetry.decodeSection(raw), {
    onLeft: (issues) => issues.map((issue) => `${issue.path}: ${issue.message}`),
    onRight: () => []
  })

describe("Telemetry.decodeSection", () => {
  it("gives a bad value of a union field one line naming the field, not a line per alternative", () => {
    expect(issuesOf({ endpoint: "http://127.0.0.1:4318", protocol: "grpc", logFormat: 3, sampler: "always_on" }))
      .toEqual([
        "telemetry.protocol: Expected one of \"http/json\", \"http/protobuf\", actual \"grpc\"",
        "telemetry.logFormat: Expected one of \"auto\", \"json\", \"pretty\", actual 3"
      ])
  })

  it("names an unknown key, and takes a section that is right", () => {
    expect(issuesOf({ endpiont: "http://127.0.0.1:4318" })).toEqual(["telemetry.endpiont: unknown key"])
    expect(issuesOf({ endpoint: "http://127.0.0.1:4318", protocol: "http/json" })).toEqual([])
  })
})

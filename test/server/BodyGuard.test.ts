/**
 * The front door's parts on their own: the input limits (linear scans, no recursion), the normal form of error
 * bodies, the media types read as JSON, the route table behind 405, and — over a real socket — a body read once
 * that every accessor can read again, and a body that never finishes arriving answered 408.
 */
import { HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import { connect } from "node:net"
import * as BodyGuard from "../../src/server/BodyGuard.js"
import * as ErrorBodies from "../../src/server/ErrorBodies.js"
import * as InputLimits from "../../src/server/InputLimits.js"
import * as Routes from "../../src/server/Routes.js"
import { baseUrl, raw } from "../support/ServerHarness.js"

const limitOf = (violation: Option.Option<InputLimits.Violation>) =>
  Option.getOrUndefined(Option.map(violation, (v) => v.limit))

describe("InputLimits", () => {
  it("bounds nesting in one pass, whatever the depth, and ignores brackets inside strings", () => {
    expect(limitOf(InputLimits.scanJson("[".repeat(1_000_000)))).toBe("maxDepth")
    expect(limitOf(InputLimits.scanJson(`${"[".repeat(64)}${"]".repeat(64)}`))).toBeUndefined()
    expect(limitOf(InputLimits.scanJson(`${"[".repeat(65)}${"]".repeat(65)}`))).toBe("maxDepth")
    expect(limitOf(InputLimits.scanJson(`{"a":"${"[".repeat(500)}\\"{{{"}`))).toBeUndefined()
    expect(limitOf(InputLimits.scanJson(JSON.stringify({ a: "x".repeat(200_001) })))).toBe("maxStringChars")
    expect(limitOf(InputLimits.scanJson(JSON.stringify({ a: "x".repeat(199_990) })))).toBeUndefined()
  })

  it("refuses NULs, lone surrogates and overlong strings in values and keys, naming the path", () => {
    const nul = InputLimits.checkValue({ a: [1, { b: "x\u0000" }] })
    expect(Option.getOrThrow(nul)).toMatchObject({ limit: "charset", path: ["a", 1, "b"] })
    expect(limitOf(InputLimits.checkValue({ ["k\u0000"]: 1 }))).toBe("charset")
    expect(limitOf(InputLimits.checkValue(["\ud800"]))).toBe("charset")
    expect(limitOf(InputLimits.checkValue(["\udc00x"]))).toBe("charset")
    expect(limitOf(InputLimits.checkValue(["🐑 emoji pairs are fine", "é\t\n"]))).toBeUndefined()
  })

  it("checks a request target's escapes, control characters and query lengths", () => {
    expect(limitOf(InputLimits.checkTarget("/v1/sessions/a%00b"))).toBe("charset")
    expect(limitOf(InputLimits.checkTarget("/v1/sessions/%E0%A4%A"))).toBe("encoding")
    expect(limitOf(InputLimits.checkTarget("/v1/sessions/%ED%A0%80"))).toBe("encoding")
    expect(limitOf(InputLimits.checkTarget(`/v1/sessions/${"x".repeat(101)}`))).toBe("maxIdChars")
    expect(limitOf(InputLimits.checkTarget("/v1/sessions?scope=%00"))).toBe("charset")
    expect(limitOf(InputLimits.checkTarget("/v1/sessions?scope=%1F"))).toBe("charset")
    expect(limitOf(InputLimits.checkTarget(`/v1/sessions?cursor=${"A".repeat(2_049)}`))).toBe("maxQueryChars")
    expect(limitOf(InputLimits.checkTarget("/v1/sessions?scope=incident%3A1&status=idle&wait"))).toBeUndefined()
  })

  it("cuts excerpts without splitting a surrogate pair", () => {
    expect(InputLimits.excerpt("short")).toBe("short")
    const cut = InputLimits.excerpt(`${"a".repeat(63)}🐑tail`, 64)
    expect(cut.startsWith(`${"a".repeat(63)}…`)).toBe(true)
    expect(cut).toContain("(69 chars)")
  })
})

describe("ErrorBodies", () => {
  it("gives every error a _tag and a message, rebuilds decode messages from bounded issues, cuts every string", () => {
    expect(ErrorBodies.normalize(404, undefined)).toEqual({ _tag: "NotFound", message: "NotFound (HTTP 404)" })
    const huge = "x".repeat(100_000)
    const issues = Array.from({ length: 30 }, (_, i) => ({ _tag: "Type", path: ["f", i], message: `bad ${huge}` }))
    const body = ErrorBodies.normalize(400, { _tag: "HttpApiDecodeError", message: huge, issues })
    expect(body.message).toMatch(/^f\.0: bad x+… \(100004 chars\); /)
    expect(String(body.message).length).toBeLessThanOrEqual(ErrorBodies.maxMessageChars + 20)
    expect(body.issues).toHaveLength(ErrorBodies.maxIssues)
    expect(body.issuesOmitted).toBe(10)
    expect(JSON.stringify(body).length).toBeLessThan(8_000)
    expect(ErrorBodies.normalize(404, { _tag: "SessionNotFound", sessionId: huge })).toMatchObject({
      _tag: "SessionNotFound",
      message: "NotFound (HTTP 404)"
    })
  })
})

describe("BodyGuard.jsonMediaType", () => {
  it("reads application/json and every application/*+json, in UTF-8 only", () => {
    for (
      const type of [
        "application/json",
        "Application/JSON; charset=UTF-8",
        "application/vnd.api+json",
        "application/merge-patch+json",
        "application/problem+json; charset=\"utf-8\"",
        "application/vnd.corral.v1+json; profile=x"
      ]
    ) expect(BodyGuard.jsonMediaType(type), type).toBe(true)
    for (
      const type of [
        "application/json; charset=utf-16",
        "application/jsonx",
        "application/json-seq",
        "application/+json",
        "text/json",
        "application/x-www-form-urlencoded",
        "json"
      ]
    ) expect(BodyGuard.jsonMediaType(type), type).toBe(false)
  })
})

describe("Routes", () => {
  it("knows the methods of every path of the contract and of the pages outside it", () => {
    expect(Routes.allowed("/v1/sessions")).toEqual(["GET", "HEAD", "POST"])
    expect(Routes.allowed("/v1/sessions/ses_1/approvals/tokens")).toEqual(["POST"])
    expect(Routes.allowed("/ui/sessions/ses_1")).toEqual(["GET", "HEAD"])
    expect(Routes.allowed("/no/such")).toEqual([])
    expect(Routes.contract.length).toBeGreaterThanOrEqual(16)
  })
})

// A bare server behind the guard whose app reads the body with `arrayBuffer` — the accessor HttpApiBuilder uses for
// a media type it does not know as JSON, and the one that hung on the stream the guard had drained.
const echoBytes = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) => Effect.map(request.arrayBuffer, (bytes) => HttpServerResponse.unsafeJson({ bytes: bytes.byteLength }))
)

const bare = HttpServer.serve(
  echoBytes,
  BodyGuard.middleware({ limitBytes: 4_096, draining: () => false, readTimeoutMs: 300 })
).pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 })))

layer(bare, { excludeTestServices: true })("BodyGuard over a real socket", (it) => {
  it.effect("hands the app a body every accessor can read, for any +json type", () =>
    Effect.gen(function*() {
      const url = yield* baseUrl
      const body = JSON.stringify({ hello: "wörld" })
      for (const type of ["application/json", "application/vnd.api+json", "application/merge-patch+json"]) {
        const response = yield* raw(`${url}/echo`, {
          method: "POST",
          body,
          headers: { "content-type": type },
          timeoutMs: 5_000
        })
        expect(response.status, type).toBe(200)
        expect(JSON.parse(response.text)).toEqual({ bytes: Buffer.byteLength(body) })
      }
    }))

  it.effect("answers 408 and closes the connection when a declared body never finishes arriving", () =>
    Effect.gen(function*() {
      const url = new URL(yield* baseUrl)
      const answer = yield* Effect.promise(() =>
        new Promise<string>((resolve, reject) => {
          const socket = connect(Number(url.port), "127.0.0.1")
          let received = ""
          const timer = setTimeout(() => (socket.destroy(), reject(new Error("no answer within 10 s"))), 10_000)
          socket.on("data", (chunk) => (received += chunk.toString("utf8")))
          socket.on("close", () => (clearTimeout(timer), resolve(received)))
          socket.write(
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":"
          )
        })
      )
      expect(answer).toMatch(/^HTTP\/1\.1 408/)
      expect(answer).toContain("RequestTimeout")
    }))
})

/**
 * MCP servers' questions in `corral serve`, over real HTTP: an agent's tool call on server-everything asks
 * (`elicitation/create`); the question appears on the session's SSE stream as an `elicitation` event, the person
 * answers with `POST /v1/sessions/{id}/elicitations/{elicitationId}`, the server gets the values (defaults filled),
 * `elicitation_settled` follows, and the session lands. An answer to a question that is not open (answered already,
 * unknown, or of another session) is a 404. The bound (declined at `answerBy`, visibly) is tested with TestClock on
 * `PendingElicitations` itself (test/server/PendingElicitations.test.ts).
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import * as path from "node:path"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as Server from "../../src/server/Server.js"
import * as FakeProvider from "../support/FakeProvider.js"
import { root } from "../support/McpServers.js"
import { baseUrl, client, raw, readSse, settings } from "../support/ServerHarness.js"

const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")

const agent = {
  id: "asker",
  version: 1,
  name: "Asker",
  instructions: "Call the tool.",
  tools: ["trigger-elicitation-request"]
}

const served = Layer.unwrapScoped(
  Effect.map(
    FakeProvider.make({
      script: [
        FakeProvider.reply({ toolCalls: [{ name: "trigger-elicitation-request", arguments: {} }] }),
        FakeProvider.text("The person answered.")
      ]
    }),
    (fake) =>
      Server.layer(settings({
        models: {
          providers: { fake: { api: "openai", baseUrl: fake.url, apiKeyEnv: "CORRAL_TEST_UNSET_KEY", model: "m" } },
          tiers: { default: ["fake"] }
        },
        mcpServers: {
          ev: {
            command: process.execPath,
            args: [EVERYTHING, "stdio"],
            exclude: ["get-env"],
            timeoutMs: 30_000,
            effects: { "trigger-elicitation-request": "read" }
          }
        }
      }))
  )
)

layer(served, { excludeTestServices: true, timeout: "90 seconds" })("MCP elicitation in corral serve", (it) => {
  it.effect("shows the question on the stream, takes the person's answer over the API, and the session lands", () =>
    Effect.gen(function*() {
      const api = yield* client()
      yield* api.agents.publishAgent({ payload: agent })
      const accepted202 = yield* api.sessions.startSession({
        payload: { agentId: "asker", scope: "q:1", prompt: "go" },
        urlParams: {}
      })
      const started = { id: "sessionId" in accepted202 ? accepted202.sessionId : accepted202.id }
      const url = `${yield* baseUrl}/v1/sessions/${started.id}/events`
      const reading = yield* Effect.fork(
        readSse(url, (events) => events.some((e) => e.event === "report"), { timeout: "60 seconds" })
      )
      // The question, as the stream shows it (live-only: read it from the stream while the burst waits).
      const asked = yield* waitForQuestion(url)
      expect(asked).toMatchObject({
        _tag: "elicitation",
        sessionId: started.id,
        name: "trigger-elicitation-request",
        server: "ev",
        message: "Please provide inputs for the following fields:"
      })
      expect(asked.requestedSchema).toHaveProperty("properties")
      expect(asked.answerBy).toBeGreaterThan(Date.now())

      const answer = `${yield* baseUrl}/v1/sessions/${started.id}/elicitations/${asked.elicitationId}`
      const accepted = yield* raw(answer, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ action: "accept", content: { name: "Ada" } })
      })
      expect(accepted.status).toBe(204)
      // Answered once: a second answer finds nothing open.
      const again = yield* raw(answer, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ action: "decline" })
      })
      expect(again.status).toBe(404)
      expect(again.text).toContain("ElicitationNotFound")

      const events = yield* Fiber.join(reading)
      expect(events.map((e) => e.event)).toContain("elicitation_settled")
      expect(events.find((e) => e.event === "elicitation_settled")?.data).toMatchObject({
        action: "accept",
        reason: "answered",
        elicitationId: asked.elicitationId
      })
      const turns = yield* api.sessions.turns({ path: { id: started.id }, urlParams: {} })
      const results = JSON.stringify(turns)
      expect(results).toContain("Ada")
      expect(results).toContain("It was a dark and stormy night.")
      const landed = yield* api.sessions.getSession({ path: { id: started.id } })
      expect(landed).toMatchObject({ exitReason: "completed" })
    }))

  it.effect("refuses an answer to a question nobody asked, with a 404 naming it", () =>
    Effect.gen(function*() {
      const api = yield* client()
      yield* api.agents.publishAgent({ payload: agent })
      const answer = yield* raw(`${yield* baseUrl}/v1/sessions/ses_nope/elicitations/eli_nope`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ action: "accept" })
      })
      expect(answer.status).toBe(404)
      const bad = yield* raw(`${yield* baseUrl}/v1/sessions/ses_nope/elicitations/eli_nope`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ action: "maybe" })
      })
      expect(bad.status).toBe(400)
      expect(bad.text).toContain("action")
    }))
})

/** Polls the live stream (SSE) until an `elicitation` event arrives; its data. */
const waitForQuestion = (url: string) =>
  Effect.map(
    readSse(url, (events) => events.some((e) => e.event === "elicitation"), { timeout: "60 seconds" }),
    (events) => {
      const found = events.find((e) => e.event === "elicitation")
      if (found === undefined) throw new Error("no elicitation event on the stream")
      return found.data as Extract<SessionEvent, { _tag: "elicitation" }>
    }
  )

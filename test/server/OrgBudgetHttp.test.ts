/**
 * An org's daily budget over HTTP: a priced provider (a fake over real HTTP) whose every reply bills 1,000 input and
 * 100 output tokens at $2 / $8 per million (2,800 µ$), and a budget of 5,000 µ$ a day for org acme. Its first session
 * spends it; its next start is a 429 `BudgetExhausted` naming the org, what it spent and when it resets, with
 * `Retry-After` counting down to that UTC midnight, and nothing created; org globex (no budget) is served as before.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fake from "../support/FakeProvider.js"
import { acme, caller, globex, pricedServer } from "../support/PricedServer.js"

const agent = { id: "triage", version: 1, name: "Triage", instructions: "Find out.", tools: ["demo_status"] }

describe("Org budgets over HTTP", () => {
  it.live(
    "a spent org gets 429 BudgetExhausted with Retry-After until UTC midnight; another org is served",
    () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({
          fallback: (request) => {
            const final = Fake.demo(request)
            return final._tag === "Reply" ? Fake.reply({ ...final.reply, usage: { input: 1_000, output: 100 } }) : final
          }
        })
        const url = yield* pricedServer(fake.openAiBaseUrl, { orgBudgets: { acme: { perDay: 5_000 } } })
        const call = caller(url)
        const start = (key: string) =>
          call(key, "POST", "/v1/sessions?wait=true", { agentId: "triage", scope: "s", prompt: "Why?" })
        expect((yield* call(acme, "POST", "/v1/agents", agent)).status).toBe(201)
        expect((yield* call(globex, "POST", "/v1/agents", agent)).status).toBe(201)

        // The fake bills 1,000 input tokens whatever it is sent (more than the request's size): the session may spend
        // past the budget by that error on its last call, and no further.
        const first = yield* start(acme)
        const spent = first.body.costMicros as number
        expect(spent).toBeGreaterThanOrEqual(5_000)

        const refused = yield* start(acme)
        expect(refused.status).toBe(429)
        const midnight = new Date(new Date().toISOString().slice(0, 10) + "T00:00:00.000Z").getTime() + 86_400_000
        expect(refused.body).toMatchObject({
          _tag: "BudgetExhausted",
          orgId: "acme",
          perDayMicros: 5_000,
          spentMicros: spent,
          resetsAt: new Date(midnight).toISOString()
        })
        expect(String(refused.body.message)).toContain("daily budget")
        const retryAfter = Number(refused.retryAfter)
        expect(retryAfter).toBeGreaterThanOrEqual(1)
        expect(Math.abs(retryAfter - (midnight - Date.now()) / 1000)).toBeLessThan(30)
        // Nothing was created: the org still has one session.
        expect(((yield* call(acme, "GET", "/v1/sessions")).body.sessions as Array<unknown>).length).toBe(1)
        // A follow-up is refused the same way.
        const followUp = yield* call(acme, "POST", `/v1/sessions/${String(first.body.id)}/messages`, { text: "more" })
        expect(followUp.status).toBe(429)

        expect((yield* start(globex)).body.exitReason).toBe("completed")
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})

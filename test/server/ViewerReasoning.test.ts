/**
 * Reasoning and money in the viewer, in a real headless Chromium: a session on gpt-5 over the Responses API (a strict
 * fake on 127.0.0.1) with reasoning summaries, priced, under a session cost budget. The session page shows each
 * assistant turn's reasoning collapsed, the usage line with reasoning tokens and dollars, and every gauge — the cost
 * gauge among them — as a `role="meter"` whose values a test (or a screen reader) reads. Skipped, saying why, without
 * /usr/bin/chromium.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import * as Server from "../../src/server/Server.js"
import * as FakeResponses from "../support/FakeResponses.js"
import { baseUrl, settings } from "../support/ServerHarness.js"

const executablePath = "/usr/bin/chromium"
const available = existsSync(executablePath)
const artifacts = fileURLToPath(new URL("../../test-artifacts/viewer/", import.meta.url))

const agent = { id: "triage", version: 1, name: "Triage", instructions: "Find out.", tools: ["demo_status"] }

describe("the viewer shows reasoning and money", () => {
  const title = "reasoning collapsed per turn, reasoning tokens and dollars in the usage line, every gauge a meter"
  if (!available) {
    it.skip(`${title} — skipped: no Chromium at ${executablePath} (install Debian's \`chromium\` to run it)`, () =>
      Effect.void)
    return
  }
  it.live(title, () =>
    Effect.gen(function*() {
      const fake = yield* FakeResponses.make({ fallback: FakeResponses.demo(2) })
      const context = yield* Layer.build(Server.layer(settings({
        models: {
          providers: {
            gpt5: {
              api: "openai-responses",
              baseUrl: fake.baseUrl,
              model: "gpt-5",
              reasoning: { effort: "low", summary: "auto" },
              pricing: { inputPerMTok: 1.25, outputPerMTok: 10 }
            }
          },
          tiers: { default: ["gpt5"] }
        },
        limits: { costPerSession: 5_000_000 }
      })))
      const url = yield* Effect.provide(baseUrl, context)
      const call = (method: string, path: string, body?: unknown) =>
        Effect.promise(async () => {
          const response = await fetch(`${url}${path}`, {
            method,
            headers: { "content-type": "application/json" },
            ...(body === undefined ? {} : { body: JSON.stringify(body) })
          })
          return { status: response.status, body: await response.json() as Record<string, unknown> }
        })
      expect((yield* call("POST", "/v1/agents", agent)).status).toBe(201)
      const landed = yield* call("POST", "/v1/sessions?wait=true", {
        agentId: "triage",
        scope: "incident:R-1",
        prompt: "Why does checkout fail?"
      })
      expect(landed.body.exitReason).toBe("completed")
      expect(fake.refusals).toEqual([])
      const costMicros = Number(landed.body.costMicros)
      expect(costMicros).toBeGreaterThan(0)

      const browser = yield* Effect.acquireRelease(
        Effect.promise(() =>
          chromium.launch({
            executablePath,
            args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
          })
        ),
        (b) => Effect.promise(() => b.close())
      )
      const page = yield* Effect.promise(() => browser.newPage())
      const errors: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))
      const run = <A>(f: () => Promise<A>) => Effect.promise(f)
      yield* run(() => page.goto(`${url}/ui/sessions/${String(landed.body.id)}`))
      yield* run(() => page.locator("[data-gauge=cost]").waitFor({ state: "attached", timeout: 30_000 }))

      // Each assistant turn's reasoning: collapsed, naming its provider, the summary inside.
      const reasoning = page.locator(".turn[data-kind=assistant] details.reasoning")
      expect(yield* run(() => reasoning.count())).toBe(3)
      expect(yield* run(() => reasoning.first().getAttribute("open"))).toBeNull()
      expect(yield* run(() => reasoning.first().locator("summary").textContent())).toBe("reasoning · gpt5 · 1 part")

      // The usage line: reasoning tokens as a part of the output, and what the session cost, in dollars.
      const usage = (yield* run(() => page.textContent("#usage"))) ?? ""
      expect(usage).toMatch(/\d+ out \(\d+ reasoning\)/)
      expect(usage).toContain(`$${(costMicros / 1e6).toFixed(6)}`)

      // Every gauge is a meter with its numbers; the cost gauge's are the session's spend against its budget.
      const meters = yield* run(() =>
        page.$$eval("[role=meter]", (nodes) =>
          nodes.map((n) => ({
            label: n.getAttribute("aria-label"),
            now: Number(n.getAttribute("aria-valuenow")),
            max: Number(n.getAttribute("aria-valuemax")),
            text: n.getAttribute("aria-valuetext")
          })))
      )
      expect(meters.map((m) => m.label)).toEqual([
        "Model calls (burst)",
        "Model calls (session)",
        "Tool calls",
        "Tokens",
        "Cost (µ$)",
        "Active time",
        "Bad-tool strikes",
        "Repeated calls"
      ])
      expect(meters.find((m) => m.label === "Cost (µ$)")).toEqual({
        label: "Cost (µ$)",
        now: costMicros,
        max: 5_000_000,
        text: `$${(costMicros / 1e6).toFixed(6)} / $5.000000`
      })
      expect(meters.find((m) => m.label === "Tool calls")?.now).toBe(2)
      expect(errors).toEqual([])
      // Opened, a turn's reasoning shows its summary.
      yield* run(() => reasoning.first().locator("summary").click())
      expect(yield* run(() => reasoning.first().locator(".text").first().textContent())).not.toBe("")
      mkdirSync(artifacts, { recursive: true })
      yield* run(() => page.screenshot({ path: join(artifacts, "session-reasoning.png"), fullPage: true }))
    }).pipe(Effect.scoped), { timeout: 180_000 })
})

/**
 * The live viewer in a real headless Chromium: from /ui, start a demo session, watch its turns arrive while the
 * burst runs (the exit reason is not there yet), then see tool calls finish, the exit reason and the report.
 * Skipped, saying why, on a machine without /usr/bin/chromium (CI installs Debian's `chromium`).
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync } from "node:fs"
import { chromium } from "playwright-core"
import * as Server from "../../src/server/Server.js"
import { baseUrl, settings } from "../support/ServerHarness.js"

const executablePath = "/usr/bin/chromium"
const available = existsSync(executablePath)

const browser = Effect.acquireRelease(
  Effect.promise(() =>
    chromium.launch({
      executablePath,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    })
  ),
  (b) => Effect.promise(() => b.close())
)

/** Opens /ui in a new page, starts a demo session with `prompt`, and lands on its page; collects page errors. */
const startFromUi = (prompt: string) =>
  Effect.gen(function*() {
    const url = yield* baseUrl
    const instance = yield* browser
    const page = yield* Effect.promise(() => instance.newPage())
    const errors: Array<string> = []
    page.on("pageerror", (error) => errors.push(error.message))
    yield* Effect.promise(() => page.goto(`${url}/ui`))
    yield* Effect.promise(() => page.waitForSelector("#agent option[value=demo]", { state: "attached" }))
    yield* Effect.promise(() => page.fill("#prompt", prompt))
    yield* Effect.promise(() => Promise.all([page.waitForURL(/\/ui\/sessions\/ses_/), page.click("#start")]))
    return { url, page, errors }
  })

layer(Server.layer(settings({ demo: { enabled: true, delayMs: 250 } })), { excludeTestServices: true })(
  "Viewer",
  (it) => {
    const title = "starts a demo session from /ui and shows its turns live, then the exit reason and the report"
    if (!available) {
      it.skip(`${title} — skipped: no Chromium at ${executablePath} (install Debian's \`chromium\` to run it)`, () =>
        Effect.void)
      return
    }
    it.scoped(title, () =>
      Effect.gen(function*() {
        const { errors, page, url } = yield* startFromUi("Why are payments failing?")

        // Live: the first turns are on the page while the burst is still running.
        yield* Effect.promise(() => page.waitForSelector(".turn[data-kind=assistant]", { timeout: 20_000 }))
        const exitWhileLive = yield* Effect.promise(() => page.textContent("#exit"))
        expect(exitWhileLive ?? "").toBe("")
        expect(yield* Effect.promise(() => page.textContent("#status"))).toBe("running")

        // A locator, not waitForFunction: the viewer's CSP forbids evaluating strings in the page (as it should).
        yield* Effect.promise(() =>
          page.locator("#exit").filter({ hasText: /^completed$/ }).waitFor({ timeout: 30_000 })
        )
        const kinds = yield* Effect.promise(() =>
          page.$$eval(".turn", (nodes) => nodes.map((n) => n.getAttribute("data-kind")))
        )
        expect(kinds).toEqual(["user", "assistant", "tool_results", "assistant", "tool_results", "assistant"])
        const calls = yield* Effect.promise(() =>
          page.$$eval(".call .state", (nodes) => nodes.map((n) => n.textContent))
        )
        expect(calls).toEqual(["done", "done"])
        yield* Effect.promise(() => page.waitForSelector("#report:not([hidden])"))
        expect(yield* Effect.promise(() => page.textContent("#report-data"))).toContain("payments")
        expect(yield* Effect.promise(() => page.textContent("#status"))).toBe("idle")
        expect(errors).toEqual([])

        // The list shows the session too.
        yield* Effect.promise(() => page.goto(`${url}/ui`))
        yield* Effect.promise(() => page.waitForSelector("#sessions tr"))
        expect(yield* Effect.promise(() => page.textContent("#sessions"))).toContain("completed")
      }), { timeout: 120_000 })

    // Tokens are shown once, to the response that issued them; a viewer that started the session in the background
    // never saw one, so its Approve button asks for a fresh token first.
    it.scoped(
      "approves a pending write from the session page, and the session carries on",
      () =>
        Effect.gen(function*() {
          const { errors, page } = yield* startFromUi("Please fix checkout")
          yield* Effect.promise(() =>
            page.locator("#exit").filter({ hasText: /^confirmation_pending$/ }).waitFor({ timeout: 30_000 })
          )
          yield* Effect.promise(() => page.waitForSelector("#pending-section:not([hidden]) .pending"))
          expect(yield* Effect.promise(() => page.textContent("#pending"))).toContain("demo_restart")
          yield* Effect.promise(() => page.click("#pending .pending button:has-text('Approve')"))
          yield* Effect.promise(() =>
            page.locator("#exit").filter({ hasText: /^completed$/ }).waitFor({ timeout: 30_000 })
          )
          expect(yield* Effect.promise(() => page.textContent("#error"))).toBe("")
          expect(yield* Effect.promise(() => page.textContent("#report-data"))).toContain("restart")
          expect(errors).toEqual([])
        }),
      { timeout: 120_000 }
    )
  }
)

import { NodeHttpClient } from "@effect/platform-node"
import { it } from "@effect/vitest"
import { Effect } from "effect"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as StormGuard from "../../src/model/StormGuard.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Fake from "../support/FakeProvider.js"

it.live("dbg", () => Effect.scoped(Effect.gen(function*() {
  const fake = yield* Fake.make({ fallback: (req) => req.n <= 150 ? Fake.rateLimited({ seconds: 1 }) : Fake.demo(req) })
  const adapter = yield* OpenAiCompat.make({ name: "primary", model: "fake-model", baseUrl: fake.openAiBaseUrl })
  const provider = StormGuard.wrap(adapter)
  const spec = Harness.agent()
  const t0 = performance.now()
  yield* Effect.forEach(Array.from({ length: 200 }, (_, i) => i), (i) =>
    Harness.runBurst({ spec, session: Harness.session(spec, { id: `ses_storm_${i}` }), prompt: `Incident ${i}` }), { concurrency: "unbounded" }
  ).pipe(Effect.provide(Harness.layer({ providers: [provider] })))
  console.log("total", performance.now() - t0)
  const seen = new Set<string>(); const hist = new Map<number, string>()
  for (const r of fake.requests) { const k = JSON.stringify(r.body.messages); const b = Math.floor((r.at - t0) / 100); const c = seen.has(k) ? "R" : r.body.response_format ? "f" : "."; hist.set(b, (hist.get(b) ?? "") + c); seen.add(k) }
  console.log([...hist].sort((a, b) => a[0] - b[0]).map(([b, s]) => `${b * 100}: ${s}`).join("\n"))
  console.log(provider.status())
})).pipe(Effect.provide(NodeHttpClient.layerUndici)), 60000)

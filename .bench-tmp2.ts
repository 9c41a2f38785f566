import { Effect, Option } from "effect"
const n = 200_000
const run = async (label: string, f: () => Effect.Effect<unknown>) => {
  const t0 = performance.now()
  await Effect.runPromise(Effect.forEach(Array.from({ length: n }, (_, i) => i), f, { discard: true }))
  console.log(label, Math.round(n / (performance.now() - t0) * 1000))
}
await run("plain", () => Effect.succeed(1).pipe(Effect.catchAllCause(() => Effect.succeed(2))))
await run("timeoutTo", () => Effect.succeed(1).pipe(Effect.timeoutTo({ duration: 60000, onSuccess: Option.some, onTimeout: Option.none })))
await run("timeoutOption", () => Effect.succeed(1).pipe(Effect.timeoutOption(60000)))
await run("json", () => Effect.sync(() => JSON.parse(`{"q":"hello"}`)))

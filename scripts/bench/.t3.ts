import { Effect, Deferred, Queue, Fiber } from "effect"
const time = async (name: string, n: number, f: () => Promise<unknown>) => {
  for (let i = 0; i < n; i++) await f()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) await f()
  console.log(name, ((performance.now() - t0) / n * 1000).toFixed(2), "µs")
}
await time("runPromise(succeed)", 20000, () => Effect.runPromise(Effect.succeed(1)))
await time("gen 100 yields", 5000, () => Effect.runPromise(Effect.gen(function*() { let s = 0; for (let i = 0; i < 100; i++) s += yield* Effect.succeed(i); return s })))
await time("timeoutFail x10", 5000, () => Effect.runPromise(Effect.gen(function*() { for (let i = 0; i < 10; i++) yield* Effect.succeed(1).pipe(Effect.timeoutFail({ duration: 10000, onTimeout: () => "x" })) })))
await time("forEach unbounded 2 x10", 5000, () => Effect.runPromise(Effect.gen(function*() { for (let i = 0; i < 10; i++) yield* Effect.forEach([1, 2], (x) => Effect.succeed(x), { concurrency: "unbounded" }) })))
await time("withSpan x10", 5000, () => Effect.runPromise(Effect.gen(function*() { for (let i = 0; i < 10; i++) yield* Effect.succeed(1).pipe(Effect.withSpan("x")) })))
await time("queue actor roundtrip x10", 2000, () => Effect.runPromise(Effect.gen(function*() {
  const q = yield* Queue.unbounded<Deferred.Deferred<number>>()
  const f = yield* Effect.fork(Effect.forever(Effect.flatMap(Queue.take(q), (d) => Deferred.succeed(d, 1))))
  for (let i = 0; i < 10; i++) { const d = yield* Deferred.make<number>(); yield* Queue.offer(q, d); yield* Deferred.await(d) }
  yield* Fiber.interrupt(f)
})))
process.exit(0)

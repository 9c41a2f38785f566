// scripts/bench/.t3.ts
import { Effect, Deferred, Queue, Fiber } from "effect";
var time = async (name, n, f) => {
  for (let i = 0; i < n; i++) await f();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f();
  console.log(name, ((performance.now() - t0) / n * 1e3).toFixed(2), "\xB5s");
};
await time("runPromise(succeed)", 2e4, () => Effect.runPromise(Effect.succeed(1)));
await time("gen 100 yields", 5e3, () => Effect.runPromise(Effect.gen(function* () {
  let s = 0;
  for (let i = 0; i < 100; i++) s += yield* Effect.succeed(i);
  return s;
})));
await time("timeoutFail x10", 5e3, () => Effect.runPromise(Effect.gen(function* () {
  for (let i = 0; i < 10; i++) yield* Effect.succeed(1).pipe(Effect.timeoutFail({ duration: 1e4, onTimeout: () => "x" }));
})));
await time("forEach unbounded 2 x10", 5e3, () => Effect.runPromise(Effect.gen(function* () {
  for (let i = 0; i < 10; i++) yield* Effect.forEach([1, 2], (x) => Effect.succeed(x), { concurrency: "unbounded" });
})));
await time("withSpan x10", 5e3, () => Effect.runPromise(Effect.gen(function* () {
  for (let i = 0; i < 10; i++) yield* Effect.succeed(1).pipe(Effect.withSpan("x"));
})));
await time("queue actor roundtrip x10", 2e3, () => Effect.runPromise(Effect.gen(function* () {
  const q = yield* Queue.unbounded();
  const f = yield* Effect.fork(Effect.forever(Effect.flatMap(Queue.take(q), (d) => Deferred.succeed(d, 1))));
  for (let i = 0; i < 10; i++) {
    const d = yield* Deferred.make();
    yield* Queue.offer(q, d);
    yield* Deferred.await(d);
  }
  yield* Fiber.interrupt(f);
})));
process.exit(0);

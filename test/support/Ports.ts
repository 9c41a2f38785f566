/** Ports for tests' own servers and runners. */
import { Effect } from "effect"
import { createServer } from "node:net"

/** A free TCP port on 127.0.0.1 (for a server or a runner that needs a fixed address before it starts). */
export const freePort: Effect.Effect<number> = Effect.promise(() =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })
)

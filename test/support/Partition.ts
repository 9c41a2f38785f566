/**
 * Corral on a fresh Postgres database reached through a TCP proxy, for tests that cut the database away mid-burst
 * (`proxy.set("blackhole" | "reset" | …)`): the real SQL store with its timeouts, live events, the given in-process
 * tools and scripted model, and the persistence timeout as the session's limit. Scoped: the proxy closes with it.
 */
import { Effect, Layer } from "effect"
import { Corral } from "../../src/Corral.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Limits from "../../src/rails/Limits.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { freshDatabase } from "../store/PostgresFixture.js"
import * as TcpProxy from "./TcpProxy.js"

/** What `throughProxy` builds Corral with. */
export interface Options {
  readonly tools: ReadonlyArray<ToolRegistry.ToolHandler>
  readonly model: ModelProvider
  /** The store's statement bound and the session's persistence timeout. */
  readonly timeoutMs: number
  readonly maxConnections: number
}

/** The proxy to cut, and Corral's layer on a fresh database behind it. */
export const throughProxy = (databaseUrl: string, options: Options) =>
  Effect.map(
    Effect.suspend(() => {
      const target = new URL(databaseUrl)
      return TcpProxy.make({ host: target.hostname, port: Number(target.port || 5432) })
    }),
    (proxy) => ({
      proxy,
      runtime: Corral.layer().pipe(
        Layer.provide(Layer.mergeAll(
          LiveEvents.layer,
          ToolRegistry.layer(options.tools),
          Layer.succeed(Providers, Providers.fromRoutes({ default: [options.model] }))
        )),
        Layer.provideMerge(SqlStore.layer({ timeoutMs: options.timeoutMs })),
        Layer.provide(
          freshDatabase(
            databaseUrl,
            { timeoutMs: options.timeoutMs, maxConnections: options.maxConnections },
            proxy.url
          )
        ),
        Layer.provide(Limits.layer({ persistTimeoutMs: options.timeoutMs }))
      )
    })
  )

/**
 * The slice of node-postgres (`pg`, a dependency of @effect/sql-pg) that the drivers touch. `pg` ships no types and
 * @types/pg is not a dependency, so this declares exactly what Embedded.ts and Database.ts use.
 */
declare module "pg" {
  /** Pool options; PGlite's `createPgConfig` supplies the connection, the rest are node-postgres's own. */
  export interface PoolConfig {
    readonly max?: number
    readonly idleTimeoutMillis?: number
    readonly connectionTimeoutMillis?: number
    readonly [key: string]: unknown
  }
  /** A node-postgres connection pool. */
  export class Pool {
    constructor(config?: PoolConfig)
    readonly options: PoolConfig
    query(text: string): Promise<unknown>
    end(): Promise<void>
    /** A connection: to `callback` (and `undefined` returned), or as a promise without one. */
    connect(
      callback?: (error: Error | undefined, client?: unknown, release?: (error?: unknown) => void) => void
    ): unknown
    on(event: "error", listener: (error: Error) => void): this
    /** A connection handed back: `error` when the caller released it broken. */
    on(event: "release", listener: (error: unknown, client: object) => void): this
  }
  /** One connection (what a `Pool` creates, or the class it is told to create with its `Client` option). */
  export class Client {
    constructor(config?: unknown)
    /** Its socket; destroying it ends the connection and fails whatever it was running. */
    readonly connection: { readonly stream: { destroy(): void } }
    query(...args: Array<unknown>): unknown
  }
}

/**
 * The slice of node-postgres (`pg`, a dependency of @effect/sql-pg) that the embedded driver touches. `pg` ships
 * no types and @types/pg is not a dependency, so this declares exactly what Embedded.ts uses.
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
    end(): Promise<void>
    on(event: "error", listener: (error: Error) => void): this
  }
}

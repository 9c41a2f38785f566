/**
 * The lock that gives an embedded data directory to one process at a time.
 *
 * PGlite is a single Postgres backend with no postmaster to arbitrate: two processes that open the same data
 * directory both write its WAL and heap files and corrupt them. So whoever opens a directory first leaves
 * `<dataDir>/corral.lock`, holding its pid, host name and start time, and removes it when the database closes;
 * anyone else is refused with the holder's pid while the holder lives.
 *
 * Creation is atomic with its content: the record is written to a private temporary file, then hard-linked to the
 * lock's name, which fails if the name exists. (An `O_EXCL` create followed by a write would let a second process
 * read an empty lock in between and take it for a crash leftover.)
 *
 * Staleness: a process killed with SIGKILL (the crash test does it) never removes its lock, and must not block the
 * next start. A lock is stale when its holder is gone: on this host, no process has its pid (`kill(pid, 0)` says
 * ESRCH), or the pid is this very process's but the record predates this process (a restarted container's pid 1,
 * say). A lock from another host cannot be checked and is always respected. A live process that merely reuses a
 * dead holder's pid keeps the directory locked: the refusal names the pid and the lock file, so an operator can
 * remove it. A stale lock is moved aside under a name private to the taker, and only deleted if what was moved is
 * still the record judged stale; otherwise (another process took over first and locked anew) it is put back.
 *
 * Times here are the operating system's, not the domain's `Clock`: the lock is about OS processes and outlives them.
 */
import { Effect } from "effect"
import { link, readFile, rename, unlink, writeFile } from "node:fs/promises"
import { hostname } from "node:os"
import { join } from "node:path"
import { PersistenceFailed } from "../../domain/Errors.js"

/** The lock file's name inside the data directory. */
export const fileName = "corral.lock"

/** What a lock file holds. */
interface Holder {
  readonly pid: number
  readonly hostname: string
  /** When the holding process started, in ms since the epoch: tells a pid's incarnations apart. */
  readonly processStartedAt: number
  /** When the lock was taken, in ms since the epoch (for the operator). */
  readonly lockedAt: number
}

const parse = (text: string): Holder | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value !== "object" || value === null) return undefined
    const { hostname, lockedAt, pid, processStartedAt } = value as Record<string, unknown>
    return typeof pid === "number" && typeof hostname === "string" && typeof processStartedAt === "number" &&
        typeof lockedAt === "number"
      ? { pid, hostname, processStartedAt, lockedAt }
      : undefined
  } catch {
    return undefined
  }
}

const sameHolder = (a: Holder, b: Holder) =>
  a.pid === b.pid && a.hostname === b.hostname && a.processStartedAt === b.processStartedAt &&
  a.lockedAt === b.lockedAt

const errorCode = (error: unknown): unknown =>
  typeof error === "object" && error !== null ? Reflect.get(error, "code") : undefined

/** The process started this long before now, give or take the clock's resolution: one incarnation of the pid. */
const sameIncarnation = (a: number, b: number) => Math.abs(a - b) < 1_000

const processStartedAt = () => Math.round(Date.now() - process.uptime() * 1_000)

/** Whether the process that wrote `holder` is gone (see the module header); false when it cannot be told. */
const isStale = (holder: Holder): boolean => {
  if (holder.hostname !== hostname()) return false
  if (holder.pid === process.pid) return !sameIncarnation(holder.processStartedAt, processStartedAt())
  try {
    process.kill(holder.pid, 0)
    return false
  } catch (error) {
    // EPERM: the pid exists but belongs to another user; only ESRCH says nobody has it.
    return errorCode(error) === "ESRCH"
  }
}

const describeHolder = (holder: Holder) =>
  `pid ${holder.pid} on host "${holder.hostname}", locked at ${new Date(holder.lockedAt).toISOString()}`

type Attempt =
  | { readonly _tag: "Acquired"; readonly holder: Holder }
  | { readonly _tag: "Held"; readonly holder: Holder | undefined }
  | { readonly _tag: "Retry" }
  | { readonly _tag: "Contended" }

/**
 * One attempt: create the lock, or judge the one in place and, when stale, clear it for the next attempt.
 * A lock whose content cannot be read as a record counts as held: every lock is created with its content.
 */
const attempt = async (path: string): Promise<Attempt> => {
  const mine: Holder = {
    pid: process.pid,
    hostname: hostname(),
    processStartedAt: processStartedAt(),
    lockedAt: Date.now()
  }
  const temporary = `${path}.${process.pid}.tmp`
  await writeFile(temporary, JSON.stringify(mine), { flag: "w" })
  try {
    await link(temporary, path)
    return { _tag: "Acquired", holder: mine }
  } catch (error) {
    if (errorCode(error) !== "EEXIST") throw error
  } finally {
    await unlink(temporary).catch(() => undefined)
  }
  const found = await readFile(path, "utf8").then(parse, (error: unknown) => {
    if (errorCode(error) === "ENOENT") return "gone" as const
    throw error
  })
  if (found === "gone") return { _tag: "Retry" }
  if (found === undefined || !isStale(found)) return { _tag: "Held", holder: found }
  const aside = `${path}.${process.pid}.stale`
  try {
    await rename(path, aside)
  } catch (error) {
    if (errorCode(error) === "ENOENT") return { _tag: "Retry" }
    throw error
  }
  const moved = parse(await readFile(aside, "utf8"))
  // Another process replaced the stale lock between our read and our rename: give its lock back.
  if (moved === undefined || !sameHolder(moved, found)) await link(aside, path).catch(() => undefined)
  await unlink(aside)
  return { _tag: "Retry" }
}

/**
 * Takes the lock of the existing directory `dataDir` for this process; the returned Effect releases it (removes
 * the file if it is still this process's). Fails with `PersistenceFailed` naming the directory and the holder when
 * another live process holds it, or when the lock file cannot be written or read.
 */
export const acquire = (dataDir: string): Effect.Effect<Effect.Effect<void>, PersistenceFailed> => {
  const path = join(dataDir, fileName)
  const failed = (message: string) => new PersistenceFailed({ operation: "openEmbedded", message })
  return Effect.tryPromise({
    try: async () => {
      // Each retry follows a lock that vanished or was cleared as stale; more than a few means a fight.
      for (let tries = 0; tries < 5; tries++) {
        const outcome = await attempt(path)
        if (outcome._tag !== "Retry") return outcome
      }
      return { _tag: "Contended" } satisfies Attempt
    },
    catch: (cause) => failed(`could not lock the data directory ${dataDir} (${path}): ${String(cause)}`)
  }).pipe(
    Effect.flatMap((outcome) =>
      outcome._tag === "Acquired"
        ? Effect.succeed(release(path, outcome.holder))
        : Effect.fail(failed(
          outcome._tag === "Held"
            ? refusal(dataDir, path, outcome.holder)
            : `could not lock the data directory ${dataDir}: its lock (${path}) kept changing hands`
        ))
    )
  )
}

const refusal = (dataDir: string, path: string, holder: Holder | undefined) =>
  holder !== undefined && holder.pid === process.pid && holder.hostname === hostname()
    ? `the data directory ${dataDir} is already open in this process (${describeHolder(holder)})`
    : `the data directory ${dataDir} is in use by another process (${
      holder === undefined ? "unreadable lock" : describeHolder(holder)
    }); one directory serves one process at a time. If that process is gone, delete ${path}`

/** Removes the lock if it is still `holder`'s; never fails (a lock left behind is stale once we exit). */
const release = (path: string, holder: Holder): Effect.Effect<void> =>
  Effect.promise(async () => {
    const current = await readFile(path, "utf8").then(parse, () => undefined)
    if (current !== undefined && sameHolder(current, holder)) await unlink(path).catch(() => undefined)
  })

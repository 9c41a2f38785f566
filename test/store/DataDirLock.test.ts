/**
 * An embedded data directory serves one process at a time (Embedded.ts, internal/dataDirLock.ts): a second process
 * is refused with the holder's pid, a lock left by a killed process is taken over, and closing releases it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { Scope } from "effect"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import * as Embedded from "../../src/store/Embedded.js"
import * as DataDirLock from "../../src/store/internal/dataDirLock.js"

const holderPath = fileURLToPath(new URL("./DataDirLockHolder.ts", import.meta.url))
const repoRoot = fileURLToPath(new URL("../..", import.meta.url))

const tempDir = Effect.acquireRelease(
  Effect.promise(() => mkdtemp(join(tmpdir(), "corral-lock-"))),
  (path) => Effect.promise(() => rm(path, { recursive: true, force: true }))
)

/** A child process holding `dataDir` open (it has printed READY); SIGKILLed by `kill` or when the scope closes. */
const holdInChild = (dataDir: string): Effect.Effect<{ pid: number; kill: Effect.Effect<void> }, Error, Scope.Scope> =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, ["--import", "tsx", holderPath, dataDir], {
          cwd: repoRoot,
          stdio: ["ignore", "pipe", "inherit"]
        })
      ),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    yield* Effect.async<void, Error>((resume) => {
      const lines = createInterface({ input: child.stdout! })
      lines.on("line", (line) => {
        if (line === "READY") resume(Effect.void)
        else resume(Effect.fail(new Error(`the holder did not open ${dataDir}: ${line}`)))
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`the holder exited (${code}) before READY`))))
    }).pipe(Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => new Error("no READY within 60 s") }))
    const kill = Effect.async<void>((resume) => {
      if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.kill("SIGKILL")
    })
    return { pid: child.pid ?? 0, kill }
  })

/** The pid of a process that has already exited. */
const deadPid = Effect.async<number>((resume) => {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" })
  child.once("exit", () => resume(Effect.succeed(child.pid ?? 0)))
})

const lockFile = (dataDir: string) => join(dataDir, DataDirLock.fileName)

const writeLock = (dataDir: string, holder: { pid: number; hostname: string }) =>
  Effect.promise(() =>
    writeFile(lockFile(dataDir), JSON.stringify({ ...holder, processStartedAt: 1, lockedAt: 2 }), "utf8")
  )

describe("embedded data directory lock", () => {
  it.live(
    "refuses a second process while one holds the directory, naming it and the holder's pid; takes over once it is killed",
    () =>
      Effect.gen(function*() {
        const dataDir = yield* tempDir
        const holder = yield* holdInChild(dataDir)

        const refused = yield* Effect.flip(Layer.build(Embedded.layerEmbedded({ dataDir })))
        expect(refused._tag).toBe("PersistenceFailed")
        expect(refused.message).toContain(`the data directory ${dataDir} is in use by another process`)
        expect(refused.message).toContain(`pid ${holder.pid}`)

        // SIGKILL: the holder's finalizers never run, so its lock stays behind, stale.
        yield* holder.kill
        expect(existsSync(lockFile(dataDir))).toBe(true)
        yield* Effect.scoped(Effect.gen(function*() {
          yield* Layer.build(Embedded.layerEmbedded({ dataDir }))
          const lock = JSON.parse(yield* Effect.promise(() => readFile(lockFile(dataDir), "utf8")))
          expect(lock).toMatchObject({ pid: process.pid, hostname: hostname() })
        }))
        expect(existsSync(lockFile(dataDir))).toBe(false)
      }).pipe(Effect.scoped),
    { timeout: 120_000 }
  )

  it.live("takes over a lock whose pid is no longer alive, and removes it on release", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      yield* writeLock(dataDir, { pid: yield* deadPid, hostname: hostname() })
      const release = yield* DataDirLock.acquire(dataDir)
      const lock = JSON.parse(yield* Effect.promise(() => readFile(lockFile(dataDir), "utf8")))
      expect(lock.pid).toBe(process.pid)
      yield* release
      expect(existsSync(lockFile(dataDir))).toBe(false)
      // Released: the next open takes it again.
      yield* Effect.flatMap(DataDirLock.acquire(dataDir), (again) => again)
    }).pipe(Effect.scoped))

  it.live("refuses a second open in the same process, and respects a lock from another host or unreadable", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const release = yield* DataDirLock.acquire(dataDir)
      const twice = yield* Effect.flip(DataDirLock.acquire(dataDir))
      expect(twice.message).toContain(`the data directory ${dataDir} is already open in this process`)
      yield* release

      yield* writeLock(dataDir, { pid: yield* deadPid, hostname: `not-${hostname()}` })
      const remote = yield* Effect.flip(DataDirLock.acquire(dataDir))
      expect(remote.message).toContain(`on host "not-${hostname()}"`)
      expect(remote.message).toContain(`delete ${lockFile(dataDir)}`)

      yield* Effect.promise(() => writeFile(lockFile(dataDir), "", "utf8"))
      expect((yield* Effect.flip(DataDirLock.acquire(dataDir))).message).toContain("unreadable lock")
    }).pipe(Effect.scoped))
})

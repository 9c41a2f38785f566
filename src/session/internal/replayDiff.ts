/**
 * replayDiff — where a replayed value first differs from the recorded one (Replay), by path: every number a rail
 * decided on exactly, clock readings within a slack one way (a recording on a real clock also spent time in store
 * writes, which the replay does not).
 */
import { Option } from "effect"

/** The keys whose values are clock readings: a replayed one may be earlier than the recorded one, not later. */
const clockKeys: ReadonlySet<string> = new Set(["at", "startedAt", "endedAt", "activeMs"])

/**
 * The first difference between two JSON-like values, by path. Clock readings compare within the slack one way: a
 * recording on a real clock also spent time in store writes, which the replay does not, so a replayed time may be
 * earlier than the recorded one by any amount but later by at most `slack`. A duration next to its start compares
 * as its END (start + duration: the replay waits for the recorded end), other durations within the slack.
 */
export const firstDifference = (
  recorded: unknown,
  replayed: unknown,
  path: string,
  slack: number,
  key = ""
): Option.Option<{ readonly path: string; readonly recorded: unknown; readonly replayed: unknown }> => {
  if (typeof recorded === "number" && typeof replayed === "number") {
    if (clockKeys.has(key)) {
      return replayed - recorded <= slack
        ? Option.none()
        : Option.some({ path, recorded, replayed })
    }
    if (key === "durationMs") {
      return Math.abs(replayed - recorded) <= slack ? Option.none() : Option.some({ path, recorded, replayed })
    }
  }
  if (Array.isArray(recorded) && Array.isArray(replayed)) {
    const n = Math.min(recorded.length, replayed.length)
    for (let i = 0; i < n; i++) {
      const d = firstDifference(recorded[i], replayed[i], `${path}[${i}]`, slack)
      if (Option.isSome(d)) return d
    }
    return recorded.length === replayed.length
      ? Option.none()
      : Option.some({ path: `${path}.length`, recorded: recorded.length, replayed: replayed.length })
  }
  if (isObject(recorded) && isObject(replayed)) {
    const ends = typeof recorded.startedAt === "number" && typeof recorded.durationMs === "number" &&
      typeof replayed.startedAt === "number" && typeof replayed.durationMs === "number"
    if (ends) {
      const rec = (recorded.startedAt as number) + (recorded.durationMs as number)
      const rep = (replayed.startedAt as number) + (replayed.durationMs as number)
      if (Math.abs(rep - rec) > slack) {
        return Option.some({ path: `${path}.(startedAt + durationMs)`, recorded: rec, replayed: rep })
      }
    }
    const keys = [...new Set([...Object.keys(recorded), ...Object.keys(replayed)])].sort()
    for (const k of keys) {
      if (ends && k === "durationMs") continue
      const d = firstDifference(recorded[k], replayed[k], path === "" ? k : `${path}.${k}`, slack, k)
      if (Option.isSome(d)) return d
    }
    return Option.none()
  }
  return Object.is(recorded, replayed) ? Option.none() : Option.some({ path, recorded, replayed })
}

/** Whether `u` is a plain object (not an array). */
const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A value as plain JSON (class instances such as `Usage` compare by their fields). */
export const plain = (u: unknown): unknown => u === undefined ? undefined : JSON.parse(JSON.stringify(u))

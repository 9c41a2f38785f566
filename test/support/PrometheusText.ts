/**
 * A strict reader of the Prometheus text exposition format, for the tests of `/metrics`.
 */

/** Parses Prometheus text strictly enough to catch a malformed exposition: every sample line, by series. */
export const parsePrometheus = (text: string): Map<string, number> => {
  const samples = new Map<string, number>()
  const typed = new Set<string>()
  for (const line of text.split("\n")) {
    if (line === "") continue
    if (line.startsWith("# HELP ")) continue
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line)
    if (type !== null) {
      typed.add(type[1]!)
      continue
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$/.exec(line)
    if (sample === null) throw new Error(`not a Prometheus sample line: ${line}`)
    const family = sample[1]!.replace(/_(bucket|sum|count)$/, "")
    if (!typed.has(sample[1]!) && !typed.has(family)) throw new Error(`sample before its TYPE: ${line}`)
    const value = sample[3] === "+Inf" ? Infinity : Number(sample[3])
    if (Number.isNaN(value) && sample[3] !== "NaN") throw new Error(`bad value: ${line}`)
    samples.set(`${sample[1]}${sample[2] ?? ""}`, value)
  }
  return samples
}

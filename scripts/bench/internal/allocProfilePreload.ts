/**
 * `--import ./scripts/bench/internal/allocProfilePreload.ts` (a diagnostic): samples every allocation of the process
 * (collected ones included, unlike `--heap-prof`) with the stack that made it, and writes the V8 sampling heap profile
 * to `CORRAL_ALLOC_PROFILE_FILE` when the process exits. Allocation sites are construction sites: where an Effect
 * program is BUILT (Corral's frame on the stack), which a CPU profile of the run loop cannot show.
 */
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector"

const session = new Session()
session.connect()
session.post("HeapProfiler.enable")
session.post("HeapProfiler.startSampling", {
  samplingInterval: Number(process.env["CORRAL_ALLOC_PROFILE_INTERVAL"] ?? "8192"),
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true
})
process.on("exit", () => {
  session.post("HeapProfiler.stopSampling", (error, result) => {
    if (error === null) {
      writeFileSync(process.env["CORRAL_ALLOC_PROFILE_FILE"] ?? "alloc.heapprofile", JSON.stringify(result.profile))
    }
  })
})

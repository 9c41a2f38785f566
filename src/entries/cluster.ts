/**
 * `corral/cluster` as Node loads it from the package: src/cluster.ts behind `load`, so that a program without
 * @effect/cluster (an optional peer) is told which packages this entry needs and the line that installs them. The
 * types are src/cluster.ts's (package.json `exports`); test/entries/OptionalPeers.test.ts keeps the names equal.
 */
import { load } from "../internal/optionalPeers.js"

const entry = await load("corral/cluster", () => import("../cluster.js"))

export const { layerCluster } = entry

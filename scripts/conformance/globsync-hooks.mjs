/* global URL */
/**
 * Module hooks for `globsync.mjs`: `fs` imported by the conformance CLI resolves to `fs-with-globsync.mjs`.
 */
const shim = new URL("./fs-with-globsync.mjs", import.meta.url).href

/** Redirects the conformance CLI's `fs` import; everything else resolves as usual. */
export const resolve = (specifier, context, next) =>
  (specifier === "fs" || specifier === "node:fs") &&
    (context.parentURL ?? "").includes("/@modelcontextprotocol/conformance/")
    ? { url: shim, shortCircuit: true }
    : next(specifier, context)

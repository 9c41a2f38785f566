/**
 * Viewer — the live session viewer at `/ui` (list, start), `/ui/sessions/{id}` (follow one session: its transcript,
 * its rails as gauges and a waterfall of each burst) and `/ui/ops` (the operations page): static HTML,
 * CSS and plain JavaScript from `viewer/`, served as they are — no build step, nothing to install. The page talks
 * to the public API only (`/v1/...`, the SSE stream and `/metrics`), so it shows exactly what any client would see.
 *
 * The files are read once when the layer is built (not at import: no import side effects).
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import type { Layer } from "effect"
import { Effect } from "effect"
import { readFile } from "node:fs/promises"

const asset = (name: string) => Effect.promise(() => readFile(new URL(`./viewer/${name}`, import.meta.url), "utf8"))

const page = (body: string, contentType: string) =>
  HttpServerResponse.text(body, {
    contentType,
    headers: {
      "cache-control": "no-cache",
      // The viewer needs nothing but its own origin.
      "content-security-policy": "default-src 'self'; img-src 'self' data:",
      "x-content-type-options": "nosniff"
    }
  })

/** The viewer's routes on the API router (`/`, `/ui`, `/ui/sessions/:id`, `/ui/ops`, `/ui/assets/*`). Fails to build only if its files are missing (a defect). */
export const layer: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const [index, session, ops, script, rails, opsScript, style] = yield* Effect.all([
      asset("index.html"),
      asset("session.html"),
      asset("ops.html"),
      asset("viewer.js"),
      asset("rails.js"),
      asset("ops.js"),
      asset("viewer.css")
    ])
    yield* router.get("/", Effect.succeed(HttpServerResponse.redirect("/ui", { status: 302 })))
    yield* router.get("/ui", Effect.succeed(page(index, "text/html; charset=utf-8")))
    yield* router.get("/ui/sessions/:id", Effect.succeed(page(session, "text/html; charset=utf-8")))
    yield* router.get("/ui/ops", Effect.succeed(page(ops, "text/html; charset=utf-8")))
    yield* router.get("/ui/assets/viewer.js", Effect.succeed(page(script, "text/javascript; charset=utf-8")))
    yield* router.get("/ui/assets/rails.js", Effect.succeed(page(rails, "text/javascript; charset=utf-8")))
    yield* router.get("/ui/assets/ops.js", Effect.succeed(page(opsScript, "text/javascript; charset=utf-8")))
    yield* router.get("/ui/assets/viewer.css", Effect.succeed(page(style, "text/css; charset=utf-8")))
  })
)

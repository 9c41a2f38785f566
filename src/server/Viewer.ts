/**
 * Viewer — the live session viewer at `/ui` (list, start) and `/ui/sessions/{id}` (follow one session): static HTML,
 * CSS and plain JavaScript from `viewer/`, served as they are — no build step, nothing to install. The page talks
 * to the public API only (`/v1/...` and the SSE stream), so it shows exactly what any client would see.
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

/** The viewer's routes on the API router (`/`, `/ui`, `/ui/sessions/:id`, `/ui/assets/*`). Fails to build only if its files are missing (a defect). */
export const layer: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const [index, session, script, style] = yield* Effect.all([
      asset("index.html"),
      asset("session.html"),
      asset("viewer.js"),
      asset("viewer.css")
    ])
    yield* router.get("/", Effect.succeed(HttpServerResponse.redirect("/ui", { status: 302 })))
    yield* router.get("/ui", Effect.succeed(page(index, "text/html; charset=utf-8")))
    yield* router.get("/ui/sessions/:id", Effect.succeed(page(session, "text/html; charset=utf-8")))
    yield* router.get("/ui/assets/viewer.js", Effect.succeed(page(script, "text/javascript; charset=utf-8")))
    yield* router.get("/ui/assets/viewer.css", Effect.succeed(page(style, "text/css; charset=utf-8")))
  })
)

/**
 * The API reference page (Scalar) at `/docs`, built on its first request and then kept. The page inlines Scalar's
 * 3.3 MB script and the whole OpenAPI document; `HttpApiScalar.layer` renders and encodes it while the server
 * starts, about a quarter of a second of CPU every start paid though few starts ever serve it. The page is still
 * `HttpApiScalar.layer`'s own, byte for byte: on the first GET that layer is built against a router of its own,
 * and each request for the page is answered by that router.
 */
import { HttpApi, HttpApiBuilder, HttpApiScalar } from "@effect/platform"
import { Effect, Layer } from "effect"

/**
 * Serves Scalar's page for the API at `path` (default `/docs`), rendered on the first GET and kept for the life of
 * the server. Never fails; concurrent first requests share one rendering.
 */
export const layer = (path: `/${string}` = "/docs"): Layer.Layer<never, never, HttpApi.Api> =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      const api = yield* HttpApi.Api
      // A fresh build: `Router.Live` here is a router of the page's own, not the server's.
      const page = yield* Effect.cached(
        HttpApiBuilder.Router.router.pipe(
          Effect.provide(Layer.provideMerge(HttpApiScalar.layer({ path }), HttpApiBuilder.Router.Live)),
          Effect.provideService(HttpApi.Api, api)
        )
      )
      yield* router.get(
        path,
        Effect.flatMap(page, (own) => own)
      )
    })
  )

/**
 * Routes — which methods each path of the server answers, for the two answers the router cannot give: 405 with an
 * `Allow` header for a wrong method on a known path, and 404 (with a JSON body) for a path nobody serves.
 *
 * Prevents: a client that sent the right path with the wrong method reading "not found" and looking for a typo in
 * the path. The table is derived from the `Api` contract (so a new endpoint is in it by construction) plus the few
 * routes outside the contract (the OpenAPI document, the docs page, the viewer, the Prometheus metrics), which are all GET.
 */
import { Api } from "./Api.js"

interface Route {
  readonly method: string
  readonly pattern: ReadonlyArray<string>
}

/** The routes outside the `Api` contract (see `Server` and `Viewer`). */
const outside: ReadonlyArray<string> = [
  "/openapi.json",
  "/docs",
  "/metrics",
  "/",
  "/ui",
  "/ui/sessions/:id",
  "/ui/assets/viewer.js",
  "/ui/assets/viewer.css"
]

const segments = (path: string): ReadonlyArray<string> => path.split("/").filter((s) => s.length > 0)

const table: ReadonlyArray<Route> = [
  ...Object.values(Api.groups).flatMap((group) =>
    Object.values(group.endpoints).map((endpoint) => ({ method: endpoint.method, pattern: segments(endpoint.path) }))
  ),
  ...outside.map((path) => ({ method: "GET", pattern: segments(path) }))
]

const matches = (pattern: ReadonlyArray<string>, path: ReadonlyArray<string>): boolean =>
  pattern.length === path.length && pattern.every((part, i) => part.startsWith(":") || part === path[i])

/** The methods the server answers at `path` (no query), sorted; empty when no route has this path. */
export const allowed = (path: string): ReadonlyArray<string> => {
  const parts = segments(path)
  const methods = new Set(table.filter((route) => matches(route.pattern, parts)).map((route) => route.method))
  if (methods.has("GET")) methods.add("HEAD")
  return [...methods].sort()
}

/** Every route of the contract: method and path pattern (`/v1/sessions/:id`). */
export const contract: ReadonlyArray<{ readonly method: string; readonly path: string }> = Object.values(Api.groups)
  .flatMap((group) => Object.values(group.endpoints).map((e) => ({ method: e.method, path: e.path })))

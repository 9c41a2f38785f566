/**
 * The loopback redirect of `corral mcp login` (RFC 8252 §7.3, "loopback interface redirection"): an HTTP listener on
 * 127.0.0.1 that takes ONE authorization response — the person's browser, sent back by the authorization server —
 * and hands its code to the login, or the reason it is refused.
 *
 * Only 127.0.0.1 is bound, never every interface: the code is a credential for a few minutes, and nothing outside
 * this machine has any business at the listener. The first response on the callback path settles the login (a code
 * whose `state` is not the one the authorization URL carried is refused — a forged redirect must not sign Corral in
 * as someone else — and ends the login, as an `error` response does); any later request is told the sign-in is over.
 * The listener closes with its scope, so no port outlives the login.
 */
import { Deferred, Effect, Either } from "effect"
import type { Scope } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** A listening loopback redirect. */
export interface Loopback {
  /** The redirect URI to register and send: `http://127.0.0.1:<port><path>`. */
  readonly redirectUrl: string
  /** The first authorization response on the path: its code, or why it was refused (a sentence). */
  readonly response: Deferred.Deferred<string, string>
}

const page = (res: http.ServerResponse, status: number, text: string): void => {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" })
  res.end(`${text}\n`)
}

/** What an authorization response on the callback path says: the code, or why it is refused. */
export const judge = (
  params: URLSearchParams,
  stateMatches: (state: string | null) => boolean
): Either.Either<string, string> => {
  const error = params.get("error")
  if (error !== null) {
    const description = params.get("error_description")
    return Either.left(`the authorization server refused: ${error}${description === null ? "" : ` (${description})`}`)
  }
  // Checked before the code is looked at: a response with another state is not ours, whatever it carries.
  if (!stateMatches(params.get("state"))) {
    return Either.left(
      "the redirect carried another state than the authorization URL Corral made: refused (a forged or stale " +
        "redirect?); nothing was stored"
    )
  }
  const code = params.get("code")
  return code === null || code === "" ? Either.left("the redirect carried no code") : Either.right(code)
}

/**
 * Listens on 127.0.0.1:`port` (0 = a free port the system picks) for the authorization response on `path`. Fails
 * with the reason when the port cannot be had (taken, not allowed). Closed, with every connection, with the scope.
 */
export const listen = (
  port: number,
  path: string,
  stateMatches: (state: string | null) => boolean
): Effect.Effect<Loopback, string, Scope.Scope> =>
  Effect.gen(function*() {
    const response = yield* Deferred.make<string, string>()
    let settled = false
    const node = http.createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1")
      if (url.pathname !== path) return page(res, 404, "Not the sign-in callback of corral mcp login.")
      if (req.method !== "GET") return page(res, 405, "The sign-in callback takes GET only.")
      if (settled) return page(res, 409, "This sign-in is already over: return to the terminal.")
      settled = true
      const verdict = judge(url.searchParams, stateMatches)
      if (Either.isLeft(verdict)) {
        page(res, 400, `Corral did not sign in: ${verdict.left}.`)
        Deferred.unsafeDone(response, Effect.fail(verdict.left))
        return
      }
      page(res, 200, "Corral received the authorization: you can close this tab and return to the terminal.")
      Deferred.unsafeDone(response, Effect.succeed(verdict.right))
    })
    yield* Effect.acquireRelease(
      Effect.async<void, string>((resume) => {
        node.once("error", (error) => resume(Effect.fail(`cannot listen on 127.0.0.1:${port}: ${error.message}`)))
        node.listen(port, "127.0.0.1", () => resume(Effect.void))
      }),
      () =>
        Effect.async<void>((resume) => {
          node.close(() => resume(Effect.void))
          node.closeAllConnections()
        })
    )
    const bound = (node.address() as AddressInfo).port
    return { redirectUrl: `http://127.0.0.1:${bound}${path}`, response }
  })

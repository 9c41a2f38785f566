/**
 * Remote — the typed client of a running Corral server, generated from the same `Api` contract the server serves.
 * CLI commands use it when `--server` (or CORRAL_SERVER) is given: the embedded database belongs to the serving
 * process, so a second process must go through the API instead of opening it.
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Option, Redacted } from "effect"
import * as Config from "../config/Config.js"
import { Api } from "../server/Api.js"
import type * as Args from "./Args.js"

/** The server's base URL from `--server` or CORRAL_SERVER, if any. */
export const target = (args: Args.Parsed) =>
  Effect.map(Config.client, (client) => ({
    url: Option.orElse(Option.fromNullable(args.strings.get("server")), () => client.server),
    apiKey: client.apiKey
  }))

/** A client of the server at `url`, sending `apiKey` as a bearer token when given. */
export const client = (url: string, apiKey: Option.Option<Redacted.Redacted>) =>
  HttpApiClient.make(Api, {
    baseUrl: url,
    transformClient: Option.match(apiKey, {
      onNone: () => (c: HttpClient.HttpClient) => c,
      onSome: (key) => HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(key)))
    })
  }).pipe(Effect.provide(FetchHttpClient.layer))

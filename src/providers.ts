/**
 * `corral/providers` — real models for an embedded Corral: the OpenAI-compatible and Anthropic adapters, the
 * provider routes as a layer, the failure classifier every adapter uses, and the default attempt settings.
 *
 * Without this entry an embedder had to write its own adapter to reach any real model. The usual wiring:
 *
 * ```ts
 * Corral.layer().pipe(
 *   Layer.provide(Providers.layer({
 *     [defaultTier]: [OpenAiCompat.make({ name: "openai", baseUrl: "https://api.openai.com/v1", model: "gpt-4o",
 *       apiKey: Redacted.make(key) })]
 *   })),
 *   Layer.provide(layerHttpClient), // the adapters need an HttpClient
 *   ...
 * )
 * ```
 */
import type { HttpClient } from "@effect/platform"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type { Layer } from "effect"

/** The OpenAI Chat Completions adapter (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter…): `make`, `layer`. */
export * as OpenAiCompat from "./model/OpenAiCompat.js"
/** The Anthropic Messages adapter: `make`, `layer`. */
export * as Anthropic from "./model/Anthropic.js"
/** The OpenAI Responses API adapter (reasoning items carried across tool turns, `store: false`): `make`, `layer`. */
export * as OpenAiResponses from "./model/OpenAiResponses.js"
/** The configuration-file form of the routes (`providers` + `tiers` sections): `decode`, `layer`, `layerNode`. */
export * as ProviderConfig from "./model/ProviderConfig.js"
/** The per-provider circuit breaker the server wraps every adapter in: `wrap(provider, options)`. */
export * as StormGuard from "./model/StormGuard.js"
/** The routes tag (`Providers.layer(routes)`), the tier agents use by default, and the default attempt settings. */
export { defaultAttempt, defaultTier, Providers } from "./model/ModelProvider.js"
/** The provider port an adapter implements, one request, a tool as the model sees it, one route entry. */
export type { ModelProvider, ModelRequest, ProviderEntry, ToolSpec } from "./model/ModelProvider.js"
/**
 * The failure classifier: an HTTP status + body (`classifyStatus`) or an in-stream error type (`classifyErrorType`)
 * to an `ErrorKind`; `parseRetryAfter` reads the wait a provider asked for; `disposition` says what the chain does
 * with a kind (retry, fail over, fail now); `describe` is the one-line form of a `ProviderError`.
 */
export {
  classifyErrorType,
  classifyStatus,
  describe,
  type Disposition,
  disposition,
  ErrorKind,
  type HeaderRecord,
  parseRetryAfter,
  ProviderError,
  ProviderExhausted,
  withProvider
} from "./model/ProviderError.js"

/** Node's HTTP client (undici) — what the adapters' `make` and `layer` need as `HttpClient`. */
export const layerHttpClient: Layer.Layer<HttpClient.HttpClient> = NodeHttpClient.layerUndici

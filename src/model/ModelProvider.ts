/**
 * The `ModelProvider` port: one model behind one API. Adapters (OpenAI-compatible, Anthropic, Scripted) implement
 * it; they classify every failure into a `ProviderError` kind once, at their boundary, and contain no loop logic.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { JsonSchema } from "../domain/AgentSpec.js"
import type { ProviderError } from "../domain/Errors.js"
import type { ModelReply, TurnEntry } from "../domain/Message.js"
import type * as Cost from "../rails/Cost.js"

/** A tool as the model sees it. */
export interface ToolSpec {
  readonly name: string
  readonly description: string
  readonly parameters: JsonSchema
}

/**
 * One request. `messages` are transcript entries (user, assistant, tool_results, notice) in order; adapters map
 * them to their wire format (a notice travels as a user message). The system prompt is built from the spec only.
 * An assistant entry's reasoning parts are sent back only by the adapter whose provider made them
 * (`Reasoning.ownParts`), and only as that provider's rules require; every other adapter leaves them out.
 */
export interface ModelRequest {
  readonly system: string
  readonly messages: ReadonlyArray<TurnEntry>
  readonly tools: ReadonlyArray<ToolSpec>
  /** Ask for a JSON reply matching this schema (the landing's finalize call). */
  readonly responseSchema?: JsonSchema
  /**
   * A cap on the reply's length in tokens, tighter than the adapter's own (a tool server's sample asks for one);
   * absent: the adapter's. Adapters that cannot send it leave it out: the caller must not rely on it.
   */
  readonly maxTokens?: number
  /** Texts that end the reply (a sample's `stopSequences`); absent: none. Callers also cut at them themselves. */
  readonly stopSequences?: ReadonlyArray<string>
  /** Streaming adapters call this with each text fragment as it arrives. */
  readonly onDelta?: (text: string) => void
  /**
   * A stable key for the provider's prompt cache: the session id, so one session's calls land on the same cache
   * (OpenAI's `prompt_cache_key`). Absent: the adapter sends none.
   */
  readonly cacheKey?: string
}

/** A model behind an API: a name for logs and trajectories, and the per-attempt rules of the chain. */
export interface ModelProvider {
  readonly name: string
  readonly model: string
  /**
   * The vendor behind the adapter, as the GenAI telemetry conventions name it (`openai`, `anthropic`): the
   * `gen_ai.provider.name` of its spans and metrics. Absent: `_OTHER`.
   */
  readonly vendor?: string
  /** Timeout of one attempt, in milliseconds. */
  readonly timeoutMs: number
  /** Attempts on this provider before failing over (transient kinds only). */
  readonly maxAttempts: number
  /**
   * What this provider charges (`rails/Cost`, picodollars per token): every attempt's usage is priced with it, and
   * cost budgets bound calls with it. Absent: its calls are not priced (they cost 0 to a cost budget).
   */
  readonly pricing?: Cost.Prices
  /**
   * The output cap this provider sends when a request has none (its configured `maxOutputTokens`): an org budget's
   * hold takes it as the call's worst case (`rails/OrgBudget`). Absent: `OrgBudget.uncappedOutputTokens`.
   */
  readonly maxOutputTokens?: number
  /** One attempt. Fails only with a classified `ProviderError`. */
  readonly complete: (request: ModelRequest) => Effect.Effect<ModelReply, ProviderError>
}

/** Defaults for the per-provider attempt rules. */
export const defaultAttempt = { timeoutMs: 120_000, maxAttempts: 3 } as const

/** The tier an agent spec without `tier` runs on; `Corral.layerMemory`'s `providers` fill it. */
export const defaultTier = "default"

/** One entry of a route given to `Providers.layer`: a built provider, or an adapter still to build (`make`). */
export type ProviderEntry<E = never, R = never> = ModelProvider | Effect.Effect<ModelProvider, E, R>

/** The provider routes: a tier name maps to an ordered provider list (the failover order). */
export class Providers extends Context.Tag("corral/model/Providers")<Providers, {
  readonly tiers: ReadonlyArray<string>
  readonly route: (tier: string) => Option.Option<ReadonlyArray<ModelProvider>>
}>() {
  /** Routes from a record of tier → providers. */
  static fromRoutes(routes: Readonly<Record<string, ReadonlyArray<ModelProvider>>>): Context.Tag.Service<Providers> {
    return {
      tiers: Object.keys(routes).sort(),
      route: (tier) => Option.fromNullable(routes[tier])
    }
  }

  /**
   * The routes as a layer: tier name → providers in failover order (`defaultTier` is the one agents without a
   * `tier` use). An entry may be an adapter's `make` effect (`OpenAiCompat.make(...)`, which needs an `HttpClient`):
   * it is built once when the layer is, and one effect listed in several tiers is one provider, shared. Fails only
   * with what building an entry fails with.
   */
  static layer<E = never, R = never>(
    routes: Readonly<Record<string, ReadonlyArray<ProviderEntry<E, R>>>>
  ): Layer.Layer<Providers, E, R> {
    return Layer.effect(
      Providers,
      Effect.gen(function*() {
        const built = new Map<ProviderEntry<E, R>, ModelProvider>()
        const resolved: Record<string, ReadonlyArray<ModelProvider>> = {}
        for (const [tier, entries] of Object.entries(routes)) {
          const providers: Array<ModelProvider> = []
          for (const entry of entries) {
            let provider = built.get(entry)
            if (provider === undefined) {
              provider = Effect.isEffect(entry) ? yield* entry : entry
              built.set(entry, provider)
            }
            providers.push(provider)
          }
          resolved[tier] = providers
        }
        return Providers.fromRoutes(resolved)
      })
    )
  }
}

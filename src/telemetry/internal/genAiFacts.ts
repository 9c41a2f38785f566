/**
 * genAiFacts — what the GenAI instrumentation (GenAi) shares: what it reads of a provider and a request
 * (structurally, so telemetry reads no `model/` type), the vendor, the span options of its spans, and a usage's parts
 * as attributes.
 */
import type { Usage } from "../../domain/Usage.js"
import type * as Spans from "../Spans.js"

/**
 * What the GenAI spans read of a model provider (its name, model and vendor) and of a request (its system prompt and
 * messages, recorded when content capture is on): structural, so telemetry sits below `model/` (a
 * `ModelProvider` and a `ModelRequest` are both these).
 */
export interface ProviderFacts {
  readonly name: string
  readonly model: string
  readonly vendor?: string | undefined
}
export interface RequestFacts {
  readonly system: string
  readonly messages: ReadonlyArray<unknown>
}

/** The vendor of a provider for `gen_ai.provider.name` (`_OTHER` when its adapter does not say). */
export const vendorOf = (provider: ProviderFacts | undefined): string => provider?.vendor ?? "_OTHER"

/**
 * Bursts, model calls, their attempts and tool calls are leaf spans (`Spans.span`): not put into Effect's context,
 * where the burst span would be propagated to every operation of the burst and every fiber it forks
 * (docs/benchmarks.md, "Notes moved from the code"). The adapters' HTTP request spans still nest under the attempt
 * (`Spans.asParentOfOthers`).
 */
export const leaf = { leaf: true } as const
/**
 * No region of its own where the fiber has one that ends it whatever happens (`Spans.span`'s `inner`): an attempt
 * inside its logical call, and a call inside its burst's region or on the burst's loop fiber (`Spans.guardFiber`,
 * session/Loop). Anywhere else (a call made on a fiber of its own) the span gets its region as before.
 */
export const inner = { leaf: true, inner: true } as const
/** A tool call is the whole run of a fiber of its own (session/ToolCall): its span ends with that fiber (`Spans.span`). */
export const wholeFiber = { leaf: true, wholeFiber: true } as const

/** The parts of an attempt's usage, as span attributes, when there are some: cache reads and writes, reasoning. */
export const usageParts = (usage: Usage): Spans.Attributes => ({
  "gen_ai.usage.cache_read.input_tokens": usage.cacheReadTokens > 0 ? usage.cacheReadTokens : undefined,
  "gen_ai.usage.cache_creation.input_tokens": usage.cacheWriteTokens > 0 ? usage.cacheWriteTokens : undefined,
  "corral.usage.reasoning.output_tokens": usage.reasoningTokens > 0 ? usage.reasoningTokens : undefined
})

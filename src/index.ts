/**
 * `corral` — an actor-model runtime for bounded LLM agent sessions. Start at `Corral`; its methods fail only with
 * `CorralError` (one union of tagged errors, recognised by `isCorralError`).
 */
export { Corral } from "./Corral.js"
export type { MemoryOptions, Service as CorralService, StartRequest } from "./Corral.js"
export { CorralError, isCorralError } from "./domain/Errors.js"
export type { CorralErrorOf } from "./domain/Errors.js"
export * from "./domain/index.js"
export * as LiveEvents from "./events/LiveEvents.js"
export { SessionEvents } from "./events/SessionEvents.js"
export { Providers } from "./model/ModelProvider.js"
export type { ModelProvider, ModelRequest, ToolSpec } from "./model/ModelProvider.js"
export * as ProviderChain from "./model/ProviderChain.js"
export * as Limits from "./rails/Limits.js"
export { Ids } from "./session/Ids.js"
export { AuthorPhase } from "./session/Landing.js"
export { Supervisor } from "./session/Supervisor.js"
export * as MemoryStore from "./store/MemoryStore.js"
export { SessionStore } from "./store/SessionStore.js"
export { ToolExecutor } from "./tools/ToolExecutor.js"
export type { ToolContext, ToolDef, ToolOutcome } from "./tools/ToolExecutor.js"
export * as ToolRegistry from "./tools/ToolRegistry.js"

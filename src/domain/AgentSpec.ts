/**
 * An agent is data: one loop runs every agent, and nothing in the loop asks which agent it is running.
 */
import { Schema, SchemaAST } from "effect"
import { ExitPolicySpec } from "./ExitChecks.js"
import { AgentId } from "./Ids.js"
import { LimitsOverride } from "./Limits.js"

/** A JSON Schema document (validated structurally when the spec is published). */
export const JsonSchema = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type JsonSchema = typeof JsonSchema.Type

/**
 * An MCP prompt an agent takes instructions from: `name` is `server/prompt` (a configured MCP server and one of its
 * prompts), `arguments` its arguments. Its text is fetched at the start of every burst and follows `instructions`.
 */
export const McpPromptRef = Schema.Struct({
  name: Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]*\/.+$/, {
      message: () => "\"server/prompt\": a configured MCP server's name, '/', then the name of one of its prompts"
    })
  ),
  arguments: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
})
export type McpPromptRef = typeof McpPromptRef.Type

/** The spec of an agent, as published. `tools` is an allowlist of tool names; `tier` picks the provider route. */
export class AgentSpec extends Schema.Class<AgentSpec>("AgentSpec")({
  id: AgentId,
  version: Schema.Int.pipe(Schema.positive({ message: () => "a positive integer version" })),
  name: Schema.NonEmptyTrimmedString,
  description: Schema.optionalWith(Schema.String, { default: () => "" }),
  instructions: Schema.NonEmptyString,
  /** An MCP prompt whose text is added after `instructions` at every burst start (`McpPromptRef`). */
  mcpPrompt: Schema.optional(McpPromptRef),
  tier: Schema.optionalWith(Schema.NonEmptyTrimmedString, { default: () => "default" }),
  tools: Schema.optionalWith(Schema.Array(Schema.NonEmptyTrimmedString), { default: () => [] }),
  skills: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  knowledgeSources: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  reportSchema: Schema.optional(JsonSchema),
  /**
   * How the report is written at landing: `model` (one extra model call without tools asking for JSON) or
   * `transcript` (built from the exit reason and the transcript, with no extra model call).
   */
  finalize: Schema.optionalWith(Schema.Literal("model", "transcript"), { default: () => "model" as const }),
  limits: Schema.optional(LimitsOverride),
  /** The agent's own exit checks and their order (`rails/ExitPolicy`): they can end a burst earlier, never later. */
  exitPolicy: Schema.optional(ExitPolicySpec)
}, [
  undefined,
  undefined,
  // The wire form (encoded side) is one named JSON Schema definition, so an OpenAPI document can point at it
  // (`#/components/schemas/AgentSpec`) instead of inlining it; only JSON Schema reads this, never a decode message.
  { [SchemaAST.JSONIdentifierAnnotationId]: "AgentSpec" }
]) {}

/**
 * What `publishAgent` takes: the spec as written (the encoded side of `AgentSpec`), so the optional fields with a
 * default (`tier`, `tools`, `finalize`, …) may be left out. It is still validated at runtime: a value from JSON or
 * from JavaScript that does not fit fails with `InvalidRequest` naming every invalid field.
 */
export type AgentSpecInput = typeof AgentSpec.Encoded

/** The keys of every member of a union (`keyof (A | B)` is only the keys they share). */
type KeysOf<T> = T extends unknown ? keyof T : never

/** The type at `K` in the members of `T` that have it. */
type At<T, K extends PropertyKey> = T extends unknown ? K extends keyof T ? T[K] : never : never

type ElementOf<T> = T extends ReadonlyArray<infer E> ? E : never

/**
 * `S` with every key that `T` does not have typed `never`, at every depth (inside `limits`, `mcpPrompt`,
 * `exitPolicy` and their arrays): an excess-property check that a generic parameter would otherwise skip. Where
 * `T` takes anything (`reportSchema`'s JSON Schema, a record), `S` is taken as it is.
 */
export type Exact<T, S> = unknown extends T ? S
  : S extends ReadonlyArray<unknown> ? { readonly [I in keyof S]: Exact<ElementOf<T>, S[I]> }
  : S extends object ? { readonly [K in keyof S]: K extends KeysOf<T> ? Exact<At<T, K>, S[K]> : never }
  : S

/**
 * Types an agent spec where it is written (autocomplete and type errors in the editor); returns it unchanged.
 * A key the spec does not have (`toolz: []`, or `limits: { toolz: 1 }` one level down) is a type error, as it is in
 * a literal passed to `publishAgent`: a generic parameter alone would take it silently. Validation happens when it
 * is published.
 */
export const defineAgent = <const S extends AgentSpecInput>(spec: S & Exact<AgentSpecInput, S>): S => spec

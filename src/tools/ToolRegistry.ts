/**
 * ToolRegistry — in-process tools behind the `ToolExecutor` port.
 *
 * A registry holds CORE tools, fixed at construction, and optionally one set of JOB tools for a run
 * (`withJobTools` returns a new registry; the receiver is untouched, so concurrent runs never see each other's job
 * tools). A job tool can never replace or shadow a core tool: the core set is what operators audited.
 *
 * Arguments are validated with ajv against each tool's JSON Schema, compiled once per tool (and cached by schema
 * object, so re-registering the same handler for every run does not recompile). `call` never fails: every problem
 * is an error-flagged outcome whose text tells the model what to do next. Malformed JSON is never repaired — a
 * repaired call would run with arguments the model did not mean.
 *
 * A tool may instead declare its parameters with an Effect `Schema` (`define` with `parameters: Schema`): the model is
 * offered the JSON Schema derived from it, and the arguments are decoded with the schema itself — so refinements and
 * transformations a JSON Schema cannot say still hold — before `run` gets the decoded, typed value. A decode failure
 * is the same `invalid_args` outcome, naming each field.
 *
 * `layered` stacks a per-session executor over a shared one; session tools shadow shared tools of the same name.
 */
import { Ajv } from "ajv"
import type { ValidateFunction } from "ajv"
import { Cause, Context, Effect, Either, Exit, Fiber, JSONSchema, Layer, Runtime, Schema } from "effect"
import type { JsonSchema } from "../domain/AgentSpec.js"
import { fieldIssues } from "../domain/Errors.js"
import * as BoundedWait from "../internal/boundedWait.js"
import { Limits } from "../rails/Limits.js"
import * as Arguments from "./internal/arguments.js"
import * as Texts from "./internal/texts.js"
import { ToolExecutor } from "./ToolExecutor.js"
import type { ToolContext, ToolDef, ToolEffect, ToolOutcome } from "./ToolExecutor.js"

/** What a tool's `run` may return: the text for the model, or the text with an error flag. */
export type ToolReturn = string | { readonly content: string; readonly isError?: boolean }

/**
 * An in-process tool: its advertised definition plus `run`. `run` receives parsed, schema-valid JSON; its failure
 * (or defect) becomes a `tool_error` outcome carrying the failure's message. `timeoutMs` tightens the call's limit
 * (the caller's `ToolContext.timeoutMs`, else `Limits.toolTimeoutMs`) for this tool: the tighter of the two applies.
 */
export interface ToolHandler extends ToolDef {
  readonly timeoutMs?: number
  /**
   * Set by `define` for a tool whose parameters are an Effect `Schema`: decodes the parsed arguments (instead of the
   * JSON Schema check), or says what is wrong, one line per field.
   */
  readonly decode?: (args: unknown) => Either.Either<unknown, string>
  readonly run: (args: unknown, ctx: ToolContext) => Effect.Effect<ToolReturn, unknown>
}

/** A registration names a tool that is already taken (a core tool, or twice in the same set). */
export class ToolNameTaken extends Schema.TaggedError<ToolNameTaken>()("ToolNameTaken", {
  tool: Schema.String,
  takenBy: Schema.Literal("core", "job")
}) {
  override get message(): string {
    return this.takenBy === "core"
      ? `tool "${this.tool}" is a core tool and cannot be replaced or shadowed`
      : `tool "${this.tool}" is registered twice`
  }
}

/** A tool's parameters are not a JSON Schema ajv can compile. */
export class InvalidToolSchema extends Schema.TaggedError<InvalidToolSchema>()("InvalidToolSchema", {
  tool: Schema.String,
  message: Schema.String
}) {}

/** A registry: the `ToolExecutor` service plus what hosts need to build per-run executors from it. */
export interface Registry extends Context.Tag.Service<ToolExecutor> {
  /** The advertised tools, sorted by name. */
  readonly tools: ReadonlyArray<ToolDef>
  /** Whether `name` is callable here. */
  readonly has: (name: string) => boolean
  /**
   * A new registry with the same core tools plus `handlers` as job tools (advertised with source `job`); this
   * registry's own job tools are not carried over. Fails with `ToolNameTaken` when a handler uses a core name or
   * two handlers share a name, `InvalidToolSchema` when a schema does not compile.
   */
  readonly withJobTools: (
    handlers: ReadonlyArray<ToolHandler>
  ) => Effect.Effect<Registry, ToolNameTaken | InvalidToolSchema>
}

/** Options of `make`. `source` overrides the source advertised for the core tools (`session`, `mcp:<server>`). */
export interface MakeOptions {
  readonly source?: string
}

/** The fields of `define`: a handler whose `effect` defaults to `read` and `source` to `core`. */
export interface ToolSpec<A> {
  readonly name: string
  readonly description: string
  readonly parameters: ToolDef["parameters"]
  readonly effect?: ToolEffect
  readonly source?: string
  readonly timeoutMs?: number
  readonly run: (args: A, ctx: ToolContext) => Effect.Effect<ToolReturn, unknown>
}

/** The fields of `define` with an Effect `Schema` for the parameters: `run` gets the decoded value, typed `A`. */
export interface SchemaToolSpec<A, I> extends Omit<ToolSpec<A>, "parameters"> {
  /** Decodes the arguments (`I`, a JSON object) into `A`; its JSON Schema is what the model is offered. */
  readonly parameters: Schema.Schema<A, I, never>
}

/**
 * The JSON Schema of a parameters `Schema`, as offered to the model: `JSONSchema.make` without `$schema`, and a
 * top-level `$ref` (a `Schema.Class`) inlined, since providers want an object schema at the top. Throws for a schema
 * with no JSON Schema form (a declaration without a `jsonSchema` annotation): a programming error.
 */
export const jsonSchemaOf = <A, I>(schema: Schema.Schema<A, I, never>): JsonSchema => {
  const { $schema: _, ...made } = JSONSchema.make(schema) as unknown as JsonSchema
  const ref = made.$ref
  const defs = made.$defs as Record<string, JsonSchema> | undefined
  if (typeof ref !== "string" || !ref.startsWith("#/$defs/") || defs === undefined) return made
  const { $ref: _ref, ...rest } = made
  return { ...rest, ...defs[ref.slice("#/$defs/".length)] }
}

/** The decoder of a Schema tool: every issue, one line per field (`- path: message`). */
const decoderOf = <A, I>(schema: Schema.Schema<A, I, never>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })
  return (args: unknown): Either.Either<unknown, string> =>
    Either.mapLeft(decode(args), (error) => {
      // One line per field: a union's alternatives merged, an optional field's `undefined` echo dropped.
      const issues = fieldIssues(error, {
        render: (path) => path.length === 0 ? "(arguments)" : path.map(String).join(".")
      })
      return issues.map((i) => `- ${i.path}: ${i.message}`).join("\n")
    })
}

/**
 * Builds a handler. With a JSON Schema for `parameters`, `A` is the argument type the schema guarantees — the
 * registry validates before `run` is called, so keeping `A` in line with `parameters` is the author's promise. With
 * an Effect `Schema`, the model is offered its JSON Schema (`jsonSchemaOf`) and `run` gets the decoded value: `A` is
 * the schema's type. Throws only for a `Schema` with no JSON Schema form (see `jsonSchemaOf`).
 */
export function define<A, I = A>(spec: SchemaToolSpec<A, I>): ToolHandler
export function define<A = unknown>(spec: ToolSpec<A>): ToolHandler
export function define(spec: ToolSpec<unknown> | SchemaToolSpec<unknown, unknown>): ToolHandler {
  const typed = Schema.isSchema(spec.parameters) ? spec.parameters as Schema.Schema<unknown, unknown, never> : undefined
  return {
    name: spec.name,
    description: spec.description,
    parameters: typed === undefined ? spec.parameters as JsonSchema : jsonSchemaOf(typed),
    effect: spec.effect ?? "read",
    source: spec.source ?? "core",
    ...(spec.timeoutMs === undefined ? {} : { timeoutMs: spec.timeoutMs }),
    ...(typed === undefined ? {} : { decode: decoderOf(typed) }),
    // The registry only calls `run` with arguments that passed `parameters` (or were decoded by it): that is the
    // cast's justification.
    run: (args, ctx) => spec.run(args, ctx)
  }
}

interface Entry {
  readonly def: ToolDef
  readonly handler: ToolHandler
  /** The JSON Schema check; absent for a Schema tool (its `decode` checks instead). */
  readonly validate: ValidateFunction | undefined
  /** Summary of the schema for invalid-args texts, computed once. */
  readonly expected: string
}

/** `strict: false`: tool schemas come from many authors (and MCP servers) and carry keywords ajv does not know. */
const ajv = new Ajv({ allErrors: true, strict: false, logger: false })
/** Compiled validators by schema object: a handler constant re-registered for every run compiles once. */
const compiled = new WeakMap<object, ValidateFunction>()

const compile = (handler: ToolHandler): ValidateFunction => {
  const cached = compiled.get(handler.parameters)
  if (cached !== undefined) return cached
  const validate = ajv.compile(handler.parameters)
  // Drop ajv's own strong reference: per-run job schemas would otherwise pile up in its cache for ever.
  ajv.removeSchema(handler.parameters)
  compiled.set(handler.parameters, validate)
  return validate
}

const toEntry = (handler: ToolHandler, source: string): Either.Either<Entry, InvalidToolSchema> => {
  let validate: ValidateFunction | undefined
  try {
    validate = handler.decode === undefined ? compile(handler) : undefined
  } catch (error) {
    return Either.left(new InvalidToolSchema({ tool: handler.name, message: Texts.messageOf(error) }))
  }
  const def: ToolDef = {
    name: handler.name,
    description: handler.description,
    parameters: handler.parameters,
    effect: handler.effect,
    source
  }
  return Either.right({ def, handler, validate, expected: Texts.summarize(handler.parameters) })
}

/** Compiles a set of handlers; names must be unique within the set and must not be `reserved`. */
const toEntries = (
  handlers: ReadonlyArray<ToolHandler>,
  source: (handler: ToolHandler) => string,
  takenBy: "core" | "job",
  reserved: ReadonlyMap<string, Entry>
): Either.Either<ReadonlyArray<Entry>, ToolNameTaken | InvalidToolSchema> => {
  const entries: Array<Entry> = []
  const seen = new Set<string>()
  for (const handler of handlers) {
    if (reserved.has(handler.name)) return Either.left(new ToolNameTaken({ tool: handler.name, takenBy: "core" }))
    if (seen.has(handler.name)) return Either.left(new ToolNameTaken({ tool: handler.name, takenBy }))
    seen.add(handler.name)
    const entry = toEntry(handler, source(handler))
    if (Either.isLeft(entry)) return Either.left(entry.left)
    entries.push(entry.right)
  }
  return Either.right(entries)
}

const byName = (a: ToolDef, b: ToolDef): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/** What `layered` needs to resolve names without listing per call; registered for registries and static layers. */
interface Static {
  readonly tools: ReadonlyArray<ToolDef>
  readonly has: (name: string) => boolean
}
const statics = new WeakMap<Context.Tag.Service<ToolExecutor>, Static>()

const toOutcome = (result: ToolReturn): ToolOutcome =>
  typeof result === "string"
    ? { content: result, isError: false }
    : result.isError === true
    ? { content: result.content, isError: true, failure: "tool_error" }
    : { content: result.content, isError: false }

const causeOutcome = (name: string, cause: Cause.Cause<unknown>): ToolOutcome => {
  // Reached only when the tool itself failed, died or interrupted itself: when the CALLER is interrupted, the
  // runtime skips this handler and the interruption propagates (the loop's cancel must still work).
  if (Cause.isInterruptedOnly(cause)) return Texts.interrupted(name)
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some") return Texts.toolError(name, Texts.messageOf(failure.value))
  const defect = Cause.dieOption(cause)
  return Texts.toolError(name, defect._tag === "Some" ? Texts.messageOf(defect.value) : Cause.pretty(cause))
}

/**
 * Runs a tool. Most in-process tools finish without ever going asynchronous, and a racing timer (two forked fibers
 * and a platform timer) would cost more than the tool itself. So the tool first runs
 * synchronously on a fiber of the caller's runtime (same services, same `Limits`, same span); only if it suspends
 * is its still-running fiber awaited against the deadline, on the fiber's observer or a timer
 * (internal/boundedWait.ts: no further fiber). Time spent before the first suspension is CPU the
 * caller would have spent anyway, and cannot be interrupted by a timer in either design.
 */
/**
 * The handler's effect run synchronously: a handler that returns a finished result (`Effect.succeed`, `Effect.fail`:
 * already an `Exit`) needs no fiber at all; any other effect runs on a fiber of `runtime` (see `runEntry`).
 */
const runNow = (
  runtime: Runtime.Runtime<never>,
  run: () => Effect.Effect<ToolReturn, unknown>
): Exit.Exit<ToolReturn, unknown> => {
  let effect: Effect.Effect<ToolReturn, unknown>
  try {
    effect = run()
  } catch (defect) {
    return Exit.die(defect)
  }
  return Exit.isExit(effect) ? effect as Exit.Exit<ToolReturn, unknown> : Runtime.runSyncExit(runtime)(effect)
}

// What a suspended tool's wait fails with at its deadline: private, so no tool's own failure can be mistaken for it.
const deadlinePassed: unique symbol = Symbol("ToolRegistry.deadlinePassed")
const toDeadline = () => deadlinePassed
const isDeadline = (cause: Cause.Cause<unknown>): boolean => Cause.isFailType(cause) && cause.error === deadlinePassed

const runEntry = (entry: Entry, args: unknown, ctx: ToolContext): Effect.Effect<ToolOutcome> =>
  // The runtime is captured OUTSIDE the mask: the tool's fiber inherits the caller's interruptibility, not the mask's.
  // (What `Effect.runtime` captures, made in place: this runs for every tool call.)
  Effect.withFiberRuntime((caller, status) => {
    const runtime = Runtime.make({
      context: caller.currentContext,
      fiberRefs: caller.getFiberRefs(),
      runtimeFlags: status.runtimeFlags
    })
    return (
      // Masked from the moment the tool's fiber exists until the interruption hand-over is installed: a cancel landing
      // in between would otherwise leave the tool running, detached.
      Effect.uninterruptibleMask((restore) => {
        const name = entry.def.name
        const exit = runNow(runtime, () => entry.handler.run(args, ctx))
        if (Exit.isSuccess(exit)) return Effect.succeed(toOutcome(exit.value))
        const defect = Cause.dieOption(exit.cause)
        if (defect._tag === "None" || !Runtime.isAsyncFiberException(defect.value)) {
          return Effect.succeed(causeOutcome(name, exit.cause))
        }
        // The suspended fiber is the one running `handler.run`, so its success type is the handler's.
        const fiber = defect.value.fiber as Fiber.RuntimeFiber<ToolReturn, unknown>
        // The burst's effective limit (host ∩ agent) when the caller says it; the host's ceiling otherwise.
        const limit = ctx.timeoutMs ?? Context.get(runtime.context, Limits).toolTimeoutMs
        const own = entry.handler.timeoutMs
        const ms = own === undefined ? limit : Math.min(own, limit)
        // At the deadline `joinWithin` interrupts the tool and fails with `deadlinePassed` once it has ended; the match
        // runs inside `restore`, so when the CALLER is interrupted it is skipped and the interruption propagates.
        return restore(Effect.matchCause(BoundedWait.joinWithin(fiber, { duration: ms, onTimeout: toDeadline }), {
          onFailure: (cause) => isDeadline(cause) ? Texts.timedOut(name, ms) : causeOutcome(name, cause),
          onSuccess: toOutcome
        })).pipe(
          // The tool's fiber is not a child of the caller: carry the caller's interruption over by hand (`joinWithin`
          // does once it waits; this covers an interruption landing as `restore` begins, before it does).
          Effect.onInterrupt(() => Fiber.interrupt(fiber))
        )
      })
    )
  })

const dispatch = (
  entries: ReadonlyMap<string, Entry>,
  available: string,
  name: string,
  argumentsJson: string,
  ctx: ToolContext
): Effect.Effect<ToolOutcome> => {
  const entry = entries.get(name)
  if (entry === undefined) return Effect.succeed(Texts.unknownTool(name, available))
  const checked = Arguments.check(name, argumentsJson, entry.validate, entry.expected)
  if (!checked.ok) return Effect.succeed(checked.outcome)
  const decode = entry.handler.decode
  if (decode === undefined) return runEntry(entry, checked.args, ctx)
  const decoded = decode(checked.args)
  if (Either.isLeft(decoded)) {
    return Effect.succeed(Texts.failed(
      "invalid_args",
      `arguments for tool "${name}" do not match its schema:\n${decoded.left}\n` +
        `Expected arguments: ${entry.expected}. Re-emit the call with corrected arguments.`
    ))
  }
  return runEntry(entry, decoded.right, ctx)
}

const build = (core: ReadonlyMap<string, Entry>, job: ReadonlyArray<Entry>): Registry => {
  const entries = new Map(core)
  for (const entry of job) entries.set(entry.def.name, entry)
  const tools = Array.from(entries.values(), (e) => e.def).sort(byName)
  const available = tools.map((t) => t.name).join(", ")
  const listed = Effect.succeed(tools)
  const has = (name: string) => entries.has(name)

  const registry: Registry = {
    list: () => listed,
    call: (name, argumentsJson, ctx) => Effect.suspend(() => dispatch(entries, available, name, argumentsJson, ctx)),
    tools,
    has,
    withJobTools: (handlers) =>
      Effect.suspend(() =>
        Either.match(toEntries(handlers, () => "job", "job", core), {
          onLeft: Effect.fail,
          onRight: (next) => Effect.succeed(build(core, next))
        })
      )
  }
  statics.set(registry, { tools, has })
  return registry
}

/**
 * A registry of the `core` handlers, advertised with their own source (or `options.source`). Throws
 * `ToolNameTaken` for a duplicated core name and `InvalidToolSchema` for a schema ajv cannot compile: core tools
 * are code, so a bad one is a programming error caught at start-up.
 */
export const make = (core: ReadonlyArray<ToolHandler>, options?: MakeOptions): Registry => {
  const source = options?.source
  const entries = toEntries(core, (handler) => source ?? handler.source, "core", new Map())
  if (Either.isLeft(entries)) throw entries.left
  return build(new Map(entries.right.map((e) => [e.def.name, e])), [])
}

/** `make(core, options)` as the `ToolExecutor` layer; a bad core set (see `make`) is a defect at build time. */
export const layer = (core: ReadonlyArray<ToolHandler>, options?: MakeOptions): Layer.Layer<ToolExecutor> =>
  Layer.sync(ToolExecutor, () => make(core, options))

const mergeLists = (session: ReadonlyArray<ToolDef>, shared: ReadonlyArray<ToolDef>): ReadonlyArray<ToolDef> => {
  const names = new Set(session.map((t) => t.name))
  return [...session, ...shared.filter((t) => !names.has(t.name))].sort(byName)
}

/**
 * One executor over another: the FIRST shadows the second — a name both list is the first's in `list` (the merged
 * name-sorted list) and in `call`. Used for a per-session executor over a shared one, and by the server for its
 * built-in tools over the MCP servers' (so no MCP server can take a built-in's name). Never fails; a name neither
 * layer knows gets the `unknown_tool` text listing the merged tools.
 */
export const layered = (
  session: Context.Tag.Service<ToolExecutor>,
  shared: Context.Tag.Service<ToolExecutor>
): Context.Tag.Service<ToolExecutor> => {
  const top = statics.get(session)
  const bottom = statics.get(shared)
  // Both layers' tool servers (a session layer has none in practice), and the prompts of whichever has them.
  const prompt = session.prompt ?? shared.prompt
  const servers = {
    ...(session.servers === undefined && shared.servers === undefined ? {} : {
      servers: Effect.zipWith(
        session.servers ?? Effect.succeed([]),
        shared.servers ?? Effect.succeed([]),
        (a, b) => [...a, ...b].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0))
      )
    }),
    ...(prompt === undefined ? {} : { prompt })
  }
  if (top !== undefined && bottom !== undefined) {
    // Both layers are fixed: resolve names from precomputed sets, never by listing on the hot path.
    const tools = mergeLists(top.tools, bottom.tools)
    const available = tools.map((t) => t.name).join(", ")
    const listed = Effect.succeed(tools)
    const has = (name: string) => top.has(name) || bottom.has(name)
    const service: Context.Tag.Service<ToolExecutor> = {
      ...servers,
      list: () => listed,
      call: (name, argumentsJson, ctx) =>
        top.has(name)
          ? session.call(name, argumentsJson, ctx)
          : bottom.has(name)
          ? shared.call(name, argumentsJson, ctx)
          : Effect.succeed(Texts.unknownTool(name, available))
    }
    statics.set(service, { tools, has })
    return service
  }
  // A dynamic layer may change what it lists: ask both on every call.
  return {
    ...servers,
    list: (ctx) => Effect.zipWith(session.list(ctx), shared.list(ctx), mergeLists),
    call: (name, argumentsJson, ctx) =>
      Effect.flatMap(
        Effect.zip(session.list(ctx), shared.list(ctx)),
        ([top, bottom]) =>
          top.some((t) => t.name === name)
            ? session.call(name, argumentsJson, ctx)
            : bottom.some((t) => t.name === name)
            ? shared.call(name, argumentsJson, ctx)
            : Effect.succeed(Texts.unknownTool(name, mergeLists(top, bottom).map((t) => t.name).join(", ")))
      )
  }
}

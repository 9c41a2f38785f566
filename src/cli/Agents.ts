/**
 * `corral agents publish FILE` — publishes an agent spec (JSON) into the local store, or to a running server with
 * `--server`. Publishing validates the whole spec (unknown tool, unknown tier, loosened limits, invalid report
 * schema) and lists every problem with its field.
 */
import { Effect, Either, Option } from "effect"
import { Corral } from "../Corral.js"
import type { AgentSpec, AgentSpecInput } from "../domain/AgentSpec.js"
import * as Wiring from "../server/Wiring.js"
import type * as Args from "./Args.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"
import * as Remote from "./Remote.js"
import { readJson } from "./RunCommand.js"

const usage = "Usage: corral agents publish FILE [--server URL] [--org ORG] [--config FILE]"

const local = (args: Args.Parsed, spec: unknown) =>
  Effect.gen(function*() {
    const settings = yield* Command.settings(args)
    const by = yield* Command.principal(args, settings)
    const published = yield* Effect.provide(
      Effect.flatMap(Corral, (corral) => corral.publishAgent(by, spec as AgentSpecInput)),
      Wiring.layer(settings, [by])
    )
    return { published, org: by.orgId }
  })

const remote = (url: string, args: Args.Parsed, spec: unknown) =>
  Effect.gen(function*() {
    const { apiKey } = yield* Remote.target(args)
    const client = yield* Remote.client(url, apiKey)
    const published: AgentSpec = yield* client.agents.publishAgent({
      payload: typeof spec === "object" && spec !== null && !Array.isArray(spec) ? { ...spec } : {}
    })
    return { published, org: url }
  })

/** The `agents` command (`agents publish FILE`). Exit code 0 when published, 1 otherwise. */
export const agents: Command.Command = {
  name: "agents",
  options: { ...Command.common, server: "string", org: "string" },
  help: [
    usage,
    "",
    "Publishes the agent spec in FILE (JSON: id, version, name, instructions, tier, tools, ...). Every invalid field",
    "is reported with its path. Without --server the spec goes into the configured store directly; while",
    "`corral serve` runs on the embedded database, publish through it instead: --server http://127.0.0.1:8787.",
    "",
    "Options:",
    "  --server URL    publish through a running server (also CORRAL_SERVER; key in CORRAL_API_KEY)",
    "  --org ORG       the org to publish into, locally (default: the local org, or the only configured org)",
    Command.commonHelp
  ].join("\n"),
  run: (args) =>
    Effect.gen(function*() {
      const [verb, file, ...rest] = args.positionals
      if (verb !== "publish" || file === undefined || rest.length > 0) return yield* Effect.fail(usage)
      const spec = yield* readJson(file)
      const { url } = yield* Remote.target(args)
      const { org, published } = Option.isSome(url)
        ? yield* remote(url.value, args, spec)
        : yield* local(args, spec)
      yield* Output.line(`published ${published.id} v${published.version} (tier ${published.tier}) into ${org}`)
      return 0
    }).pipe(
      Effect.either,
      Effect.flatMap(Either.match({
        onLeft: (error) => Effect.as(Output.error(`corral agents: ${Failure.describe(error)}`), 1),
        onRight: Effect.succeed
      }))
    )
}

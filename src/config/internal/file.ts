/**
 * file — the configuration file (Config): named by `CORRAL_CONFIG` (default `./corral.json`, whose absence means
 * defaults, where an absent file that was named is an error), read and parsed into a JSON object.
 */
import { Config as EffectConfig, Effect, Either, Option } from "effect"
import { readFile } from "node:fs/promises"
import * as EnvVars from "../../internal/envVars.js"
import { described } from "./environment.js"
import { ConfigInvalid, configIssues, fail } from "./invalid.js"

/** The file's text; `None` when it does not exist. */
const readText = (path: string) =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (error) => error
  }).pipe(
    Effect.map(Option.some),
    Effect.catchAll((error) =>
      typeof error === "object" && error !== null && Reflect.get(error, "code") === "ENOENT"
        ? Effect.succeed(Option.none<string>())
        : Effect.fail(String(error))
    )
  )

/** Parses JSON text, or says why it is not JSON. */
export const parseJson = (text: string): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(text))
  } catch (error) {
    return Either.left(`not valid JSON (${error instanceof Error ? error.message : String(error)})`)
  }
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Reads the file named by `CORRAL_CONFIG`, or nothing when the default path does not exist. */
export const readFileSection = Effect.gen(function*() {
  const explicit = yield* EffectConfig.option(described("CORRAL_CONFIG", EffectConfig.string("CORRAL_CONFIG"))).pipe(
    Effect.mapError((error) => new ConfigInvalid({ source: "environment", issues: configIssues(error) }))
  )
  const path = Option.getOrElse(explicit, () => EnvVars.byName("CORRAL_CONFIG").default ?? "./corral.json")
  const text = yield* readText(path).pipe(
    Effect.mapError((reason) => fail(path, "(file)", `cannot read the configuration file: ${reason}`))
  )
  if (Option.isNone(text)) {
    if (Option.isSome(explicit)) {
      return yield* fail("CORRAL_CONFIG", "CORRAL_CONFIG", `names ${path}, which does not exist`)
    }
    return { path: undefined, raw: {} as Record<string, unknown> }
  }
  const parsed = parseJson(text.value)
  if (Either.isLeft(parsed)) return yield* fail(path, "(file)", parsed.left)
  if (!isObject(parsed.right)) return yield* fail(path, "(root)", "expected a JSON object")
  return { path, raw: parsed.right }
})

/**
 * JSON Schema validation for reports, compiled once per schema object.
 */
import { Ajv } from "ajv"
import type { ErrorObject, ValidateFunction } from "ajv"
import type { JsonSchema } from "../../domain/AgentSpec.js"

const ajv = new Ajv({ allErrors: true, strict: false })
const compiled = new WeakMap<object, ValidateFunction>()

/** Compiles `schema` (cached). Throws if the schema itself is invalid; callers validate specs at publish time. */
export const compile = (schema: JsonSchema): ValidateFunction => {
  let fn = compiled.get(schema)
  if (fn === undefined) {
    fn = ajv.compile(schema)
    compiled.set(schema, fn)
  }
  return fn
}

/** Whether `schema` is a JSON Schema ajv can compile; the error message when it is not. */
export const check = (schema: JsonSchema): string | undefined => {
  try {
    compile(schema)
    return undefined
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}

/** `path: message` for each validation error. */
export const describe = (errors: ReadonlyArray<ErrorObject> | null | undefined): string =>
  (errors ?? []).map((e) => `${e.instancePath || "/"}: ${e.message ?? "is invalid"}`).join("; ")

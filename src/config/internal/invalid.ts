/**
 * invalid — how the configuration (Config) says it is wrong: one error listing every problem with its key path, and
 * a `ConfigError` of effect's `Config` flattened into such problems, named by the variable.
 */
import type { ConfigError } from "effect"
import { Schema } from "effect"
import { FieldIssue } from "../../domain/Errors.js"

/** The configuration is invalid; `issues` lists every problem with its key path (and source when not the file). */
export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", {
  source: Schema.String,
  issues: Schema.Array(FieldIssue)
}) {
  override get message(): string {
    return `invalid configuration (${this.source}):\n${
      this.issues.map((i) => `  - ${i.path}: ${i.message}`).join("\n")
    }`
  }
}

/** A `ConfigInvalid` with one problem. */
export const fail = (source: string, path: string, message: string) =>
  new ConfigInvalid({ source, issues: [new FieldIssue({ path, message })] })

/** Flattens a `ConfigError` into one issue per leaf, named by the variable. */
export const configIssues = (error: ConfigError.ConfigError): Array<FieldIssue> => {
  switch (error._op) {
    case "And":
    case "Or":
      return [...configIssues(error.left), ...configIssues(error.right)]
    default:
      return [new FieldIssue({ path: error.path.join(".") || "(environment)", message: error.message })]
  }
}

/**
 * The one argument check every executor runs before dispatch: JSON that parses (never repaired), an object, and
 * valid against the tool's schema. Failures come back as the prescriptive outcomes of `texts.ts`.
 */
import type { ValidateFunction } from "ajv"
import type { ToolOutcome } from "../ToolExecutor.js"
import * as Texts from "./texts.js"

/** The parsed arguments, or the outcome that tells the model how to fix its call. */
export type Checked =
  | { readonly ok: true; readonly args: Record<string, unknown> }
  | { readonly ok: false; readonly outcome: ToolOutcome }

/** Parses and validates `argumentsJson` for tool `name`; `validate` absent means the tool declared no schema. */
export const check = (
  name: string,
  argumentsJson: string,
  validate: ValidateFunction | undefined,
  expected: string
): Checked => {
  let args: unknown
  try {
    args = JSON.parse(argumentsJson)
  } catch (error) {
    return { ok: false, outcome: Texts.invalidJson(name, Texts.messageOf(error)) }
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return { ok: false, outcome: Texts.notAnObject(name, args, expected) }
  }
  if (validate !== undefined && !validate(args)) {
    return { ok: false, outcome: Texts.invalidArgs(name, validate.errors ?? [], expected) }
  }
  return { ok: true, args: args as Record<string, unknown> }
}

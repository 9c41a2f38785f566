/**
 * JSON values from a JSON Schema, for property tests of tools: values the schema accepts, values it rejects, and
 * text that is not JSON at all. Without this, generated tool calls only fit tools shaped like the demo's, and a
 * property test of any other tool passes vacuously (every call is refused before the tool runs).
 *
 * Covers the subset tool schemas use: `type` (one or several), `properties` / `required` / `additionalProperties`,
 * `enum`, `const`, `anyOf` / `oneOf` / `allOf` (basic), string `minLength` / `maxLength` / `pattern` / common
 * `format`s, number and integer bounds (inclusive and exclusive) and `multipleOf`, arrays (`items`, `prefixItems`,
 * `minItems` / `maxItems`, `uniqueItems`), local `$ref`s into `$defs` / `definitions`. Unknown keywords are ignored.
 * Whether a value is valid is decided by ajv (the registry's validator), never by this generator's own reading.
 */
import { Ajv } from "ajv"
import type { ValidateFunction } from "ajv"
import { FastCheck as fc } from "effect"

/** A JSON Schema document, as tools declare it. */
export type Schema = Readonly<Record<string, unknown>>

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const num = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) ? u : undefined)
const schemaOf = (u: unknown): Schema => (isRecord(u) ? u : u === false ? { not: {} } : {})

/** Beyond this nesting, optional properties are left out and arrays keep their minimum length (recursive refs end). */
const maxDepth = 4
/** The longest generated array when a schema sets no `maxItems`. */
const defaultMaxItems = 4

const resolve = (root: Schema, schema: Schema): Schema => {
  const ref = schema["$ref"]
  if (typeof ref !== "string" || !ref.startsWith("#")) return schema
  let target: unknown = root
  for (const part of ref.slice(1).split("/").filter((p) => p.length > 0)) {
    target = isRecord(target) ? target[part.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined
  }
  // Keywords next to a `$ref` apply too (ajv reads them; Effect's `JSONSchema.make` puts refinements there).
  const { $ref: _ref, ...siblings } = schema
  return { ...(isRecord(target) ? resolve(root, target) : {}), ...siblings }
}

/** `allOf` folded into one schema (properties and required merged): enough for the object compositions tools use. */
const flatten = (root: Schema, input: Schema): Schema => {
  const schema = resolve(root, input)
  const all = schema["allOf"]
  if (!Array.isArray(all)) return schema
  const parts = [schema, ...all.map((s) => flatten(root, schemaOf(s)))]
  const merged: Record<string, unknown> = {}
  const properties: Record<string, unknown> = {}
  const required = new Set<string>()
  for (const part of parts) {
    for (const [k, v] of Object.entries(part)) if (k !== "allOf") merged[k] = v
    if (isRecord(part["properties"])) Object.assign(properties, part["properties"])
    if (Array.isArray(part["required"])) { for (const r of part["required"]) required.add(String(r)) }
  }
  if (Object.keys(properties).length > 0) merged["properties"] = properties
  if (required.size > 0) merged["required"] = [...required]
  return merged
}

const typesOf = (schema: Schema): ReadonlyArray<string> => {
  const t = schema["type"]
  if (typeof t === "string") return [t]
  if (Array.isArray(t)) return t.filter((x): x is string => typeof x === "string")
  if (isRecord(schema["properties"]) || schema["additionalProperties"] !== undefined) return ["object"]
  if (schema["items"] !== undefined || schema["prefixItems"] !== undefined) return ["array"]
  return []
}

const formats: Record<string, fc.Arbitrary<string>> = {
  "date-time": fc.date({ min: new Date(0), max: new Date(4_102_444_800_000), noInvalidDate: true }).map((d) =>
    d.toISOString()
  ),
  date: fc.date({ min: new Date(0), max: new Date(4_102_444_800_000), noInvalidDate: true }).map((d) =>
    d.toISOString().slice(0, 10)
  ),
  email: fc.emailAddress(),
  uri: fc.webUrl(),
  url: fc.webUrl(),
  uuid: fc.uuid()
}

const stringValue = (schema: Schema): fc.Arbitrary<string> => {
  const minLength = num(schema["minLength"]) ?? 0
  const maxLength = num(schema["maxLength"])
  const fits = (s: string) => s.length >= minLength && (maxLength === undefined || s.length <= maxLength)
  const format = typeof schema["format"] === "string" ? formats[schema["format"]] : undefined
  if (typeof schema["pattern"] === "string") {
    // A pattern fast-check cannot generate from (lookarounds, back-references) falls back to plain strings: those
    // calls come out invalid, which the stated mix then over-counts, but nothing crashes.
    try {
      return fc.stringMatching(new RegExp(schema["pattern"], "u")).filter(fits)
    } catch {
      // fall through
    }
  }
  if (format !== undefined) return format.filter(fits)
  return fc.string({ minLength, maxLength: maxLength ?? Math.max(minLength, 12) })
}

const numberValue = (schema: Schema, integer: boolean): fc.Arbitrary<number> => {
  const exMin = num(schema["exclusiveMinimum"])
  const exMax = num(schema["exclusiveMaximum"])
  let min = num(schema["minimum"])
  let max = num(schema["maximum"])
  const step = num(schema["multipleOf"])
  if (integer || step !== undefined) {
    const unit = step ?? 1
    // Integers (or multiples of `multipleOf`) as k * unit, with k bounded so the product stays inside the bounds.
    const lo = Math.max(
      min === undefined ? -1_000_000 : Math.ceil(min / unit),
      exMin === undefined ? -1_000_000 : Math.floor(exMin / unit) + 1
    )
    const hi = Math.min(
      max === undefined ? 1_000_000 : Math.floor(max / unit),
      exMax === undefined ? 1_000_000 : Math.ceil(exMax / unit) - 1
    )
    const k = fc.integer({ min: lo, max: Math.max(lo, hi) })
    return integer && !Number.isInteger(unit) ? k.map((x) => x * Math.ceil(unit)) : k.map((x) => x * unit)
  }
  if (exMin !== undefined && (min === undefined || exMin >= min)) min = exMin
  if (exMax !== undefined && (max === undefined || exMax <= max)) max = exMax
  return fc.double({
    noNaN: true,
    noDefaultInfinity: true,
    ...(min === undefined ? {} : { min, minExcluded: min === exMin }),
    ...(max === undefined ? {} : { max, maxExcluded: max === exMax })
  }).map((x) => (Object.is(x, -0) ? 0 : x))
}

const uniqueByJson = (u: unknown) => JSON.stringify(u)

/** Values `schema` accepts (as far as this subset reads it; see the module header). */
export const valid = (root: Schema, input: Schema = root, depth = 0): fc.Arbitrary<unknown> => {
  const schema = flatten(root, input)
  if ("const" in schema) return fc.constant(schema["const"])
  if (Array.isArray(schema["enum"]) && schema["enum"].length > 0) return fc.constantFrom(...schema["enum"])
  const branches = Array.isArray(schema["anyOf"]) ? schema["anyOf"] : schema["oneOf"]
  if (Array.isArray(branches) && branches.length > 0) {
    // The branch's own keywords plus the parent's (an `anyOf` often only adds `required` to shared properties).
    const { anyOf: _a, oneOf: _o, ...shared } = schema
    return fc.oneof(...branches.map((b) => valid(root, { ...shared, ...schemaOf(b) }, depth)))
  }
  const types = typesOf(schema)
  if (types.length === 0) return fc.jsonValue({ maxDepth: 2 })
  return fc.oneof(...types.map((t) => validOfType(root, schema, t, depth)))
}

const validOfType = (root: Schema, schema: Schema, type: string, depth: number): fc.Arbitrary<unknown> => {
  switch (type) {
    case "string":
      return stringValue(schema)
    case "integer":
      return numberValue(schema, true)
    case "number":
      return numberValue(schema, false)
    case "boolean":
      return fc.boolean()
    case "null":
      return fc.constant(null)
    case "array":
      return arrayValue(root, schema, depth)
    case "object":
      return objectValue(root, schema, depth)
    default:
      return fc.jsonValue({ maxDepth: 1 })
  }
}

const arrayValue = (root: Schema, schema: Schema, depth: number): fc.Arbitrary<unknown> => {
  const prefix = Array.isArray(schema["prefixItems"]) ? schema["prefixItems"].map(schemaOf) : []
  const items = schemaOf(schema["items"])
  const minItems = Math.max(num(schema["minItems"]) ?? 0, 0)
  const cap = num(schema["maxItems"]) ?? Math.max(minItems, defaultMaxItems)
  const maxItems = depth >= maxDepth ? minItems : Math.max(minItems, cap)
  if (prefix.length > 0) {
    return fc.tuple(...prefix.map((s) => valid(root, s, depth + 1)))
  }
  const item = valid(root, items, depth + 1)
  return schema["uniqueItems"] === true
    ? fc.uniqueArray(item, { minLength: minItems, maxLength: maxItems, selector: uniqueByJson })
    : fc.array(item, { minLength: minItems, maxLength: maxItems })
}

const objectValue = (root: Schema, schema: Schema, depth: number): fc.Arbitrary<unknown> => {
  const properties = isRecord(schema["properties"]) ? schema["properties"] : {}
  const required = Array.isArray(schema["required"]) ? schema["required"].map(String) : []
  const keys = [...new Set([...Object.keys(properties), ...required])]
  const optional = depth >= maxDepth ? keys.filter((k) => required.includes(k)) : keys
  const model: Record<string, fc.Arbitrary<unknown>> = {}
  for (const key of optional) model[key] = valid(root, schemaOf(properties[key]), depth + 1)
  const fixed = fc.record(model, { requiredKeys: required.filter((k) => k in model) })
  const extra = schema["additionalProperties"]
  // A map-like object (`additionalProperties: <schema>` and nothing declared) gets a few entries of that schema.
  if (keys.length === 0 && isRecord(extra) && depth < maxDepth) {
    return fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), valid(root, extra, depth + 1), { maxKeys: 3 })
  }
  return fixed
}

const validators = new WeakMap<object, ValidateFunction>()
/** Same settings as the registry's ajv: tool schemas carry keywords ajv does not know. */
const ajv = new Ajv({ allErrors: true, strict: false, logger: false })

/** ajv's verdict on `value` against `schema`, the registry's way; a schema ajv cannot compile accepts nothing. */
export const accepts = (schema: Schema, value: unknown): boolean => {
  let validate = validators.get(schema)
  if (validate === undefined) {
    try {
      validate = ajv.compile(schema)
      ajv.removeSchema(schema)
    } catch {
      return false
    }
    validators.set(schema, validate)
  }
  return validate(value) === true
}

/** A value of another JSON type than every type `schema` allows. */
const wrongType = (schema: Schema): ReadonlyArray<unknown> => {
  const types = typesOf(schema)
  const samples: ReadonlyArray<readonly [string, unknown]> = [
    ["string", "not-a-value"],
    ["integer", 7],
    ["number", 0.5],
    ["boolean", true],
    ["object", { unexpected: 1 }],
    ["array", ["x"]],
    ["null", null]
  ]
  return samples.filter(([t]) => !types.includes(t) && !(t === "integer" && types.includes("number"))).map(([, v]) => v)
}

/** Every single-fault change of `value` that may break `schema`: a missing required field, a wrong type, ... */
const mutations = (root: Schema, input: Schema, value: unknown, depth = 0): ReadonlyArray<unknown> => {
  const schema = flatten(root, input)
  const out: Array<unknown> = [...wrongType(schema).slice(0, 2)]
  if (Array.isArray(schema["enum"]) || "const" in schema) out.push("not-one-of-the-allowed-values")
  const min = num(schema["minimum"]) ?? num(schema["exclusiveMinimum"])
  const max = num(schema["maximum"]) ?? num(schema["exclusiveMaximum"])
  if (min !== undefined) out.push(min - 1)
  if (max !== undefined) out.push(max + 1)
  const minLength = num(schema["minLength"])
  const maxLength = num(schema["maxLength"])
  if (minLength !== undefined && minLength > 0) out.push("")
  if (maxLength !== undefined) out.push("x".repeat(maxLength + 1))
  if (depth >= maxDepth) return out
  if (isRecord(value)) {
    const properties = isRecord(schema["properties"]) ? schema["properties"] : {}
    const required = Array.isArray(schema["required"]) ? schema["required"].map(String) : []
    for (const key of required) {
      const { [key]: _dropped, ...rest } = value
      out.push(rest)
    }
    for (const [key, v] of Object.entries(value)) {
      for (const m of mutations(root, schemaOf(properties[key]), v, depth + 1)) out.push({ ...value, [key]: m })
    }
    if (schema["additionalProperties"] === false) out.push({ ...value, not_a_parameter: "x" })
  }
  if (Array.isArray(value)) {
    const minItems = num(schema["minItems"])
    const maxItems = num(schema["maxItems"])
    if (minItems !== undefined && minItems > 0) out.push(value.slice(0, minItems - 1))
    if (maxItems !== undefined) {
      out.push([
        ...value,
        ...Array.from({ length: maxItems + 1 - value.length }, () => value[0])
      ])
    }
    const items = schemaOf(schema["items"])
    if (value.length > 0) {
      for (const m of mutations(root, items, value[0], depth + 1)) out.push([m, ...value.slice(1)])
    }
  }
  return out
}

/**
 * Values `schema` rejects (ajv's verdict), each one fault away from a value of `validValues`: a required field
 * left out, a field of the wrong type or out of its range, a value outside an enum, an unknown field where
 * `additionalProperties` is false — an object whenever one is rejected, else a value of another type (a schema that
 * accepts every object). `undefined` when nothing near a valid value is rejected (a schema that accepts anything).
 */
export const invalid = (
  root: Schema,
  validValues: fc.Arbitrary<unknown> = valid(root)
): fc.Arbitrary<unknown | undefined> =>
  fc.tuple(validValues, fc.nat()).map(([value, pick]) => {
    const rejected = mutations(root, root, value).filter((m) => !accepts(root, m))
    // Objects first (tool arguments are objects); a value of another type only when no object is rejected.
    const objects = rejected.filter(isRecord)
    const pool = objects.length > 0 ? objects : rejected
    return pool.length > 0 ? pool[pick % pool.length] : undefined
  })

/** Text that does not parse as JSON: a valid value's JSON cut short, single quotes, a trailing comma, prose. */
export const malformed = (validValues: fc.Arbitrary<unknown>): fc.Arbitrary<string> =>
  fc.tuple(validValues, fc.nat(), fc.constantFrom("cut", "quotes", "comma", "prose")).map(([value, cut, how]) => {
    const json = JSON.stringify(value) ?? "null"
    const candidate = how === "cut" && json.length > 1
      ? json.slice(0, 1 + (cut % (json.length - 1)))
      : how === "quotes"
      ? json.replace(/"/g, "'")
      : how === "comma"
      ? `${json.slice(0, -1)},${json.slice(-1)}`
      : "not json"
    try {
      JSON.parse(candidate)
      return "not json"
    } catch {
      return candidate
    }
  })

/**
 * Compact storage for many similar records (the memory store's closed trajectories), decoded on read to values
 * equal to what was stored.
 *
 * Why: the memory store keeps every trajectory of every session for the life of the process, and as objects a
 * trajectory is forty-odd objects, arrays and boxed timestamps — a large share of what a held session costs
 * (docs/benchmarks.md, "Notes moved from the code"). Storing them as JSON text was tried and was
 * worse: text copies the strings a record shares with the transcript and the values interned across records.
 *
 * How: a record is flattened into its structure (object keys, array lengths, prototypes; the "signature") and its
 * leaves (strings, numbers, booleans, and anything kept by reference). The first record of each signature becomes a
 * `Template` that keeps its leaves; a later record of the same signature keeps only the leaves that differ from
 * the template's. Differing strings and objects are kept by reference (never copied); differing integers are
 * written as the difference to the template's value (a timestamp becomes a few characters) into one one-byte
 * string, together with where each difference sits. A trajectory of the workload's held sessions packs to ~160
 * bytes: an array of a few slots and a string of a few dozen characters.
 *
 * What is flattened: plain objects, arrays, and instances of the classes named to `make` (the domain's
 * `Schema.Class`es, whose state is their own enumerable fields: a decoded one is made on the same prototype with
 * the same fields, and is `Equal` to the original). Everything else — other class instances, frozen (shared)
 * objects, very long arrays, objects with many keys, anything nested deeper than `maxDepth` — is a leaf kept by
 * reference, exactly as it was stored. Bounded: at most `maxTemplates` signatures get a template; a record of a
 * signature beyond them is kept as it is.
 */

/** A value's structure, where each leaf sits in the flattened order. */
type Shape =
  | { readonly _tag: "leaf" }
  | {
    readonly _tag: "object"
    /** `undefined` for a plain object, else the prototype to make it on. */
    readonly proto: object | undefined
    readonly keys: ReadonlyArray<string>
    readonly fields: ReadonlyArray<Shape>
  }
  | { readonly _tag: "array"; readonly items: ReadonlyArray<Shape> }

const leafShape: Shape = { _tag: "leaf" }

/** The first record of a signature: its structure and its leaves, which later records are told apart from. */
interface Template {
  readonly shape: Shape
  readonly leaves: ReadonlyArray<unknown>
}

/**
 * A packed record: `[template, differences, key, ...references]`. `differences` is a one-byte string of base-128
 * varints: per differing leaf, `2 × gap + packed` (gap: leaves since the previous difference), then for a packed
 * integer its zig-zagged difference to the template's value; a leaf that is not packed takes the next reference.
 * `key` is what the caller gave `pack` to find the record by without unpacking it (a slot, not an object around it).
 */
export type Packed = readonly [Template, string, unknown, ...Array<unknown>]

/** The key a record was packed with. */
export const keyOf = (packed: Packed): unknown => packed[2]

/** Nesting deeper than this is kept by reference (also what bounds a cyclic value). */
const maxDepth = 24
/** Arrays longer than this, and objects with more keys, are kept by reference. */
const maxWidth = 256
/**
 * Strings longer than this are never compared with the template's, and are kept by reference: comparing two strings
 * of equal length compares their characters, which makes V8 flatten a concatenated one — a report's summary that
 * ends with a 1 KB reply of the transcript would get a copy of it. Shorter ones are compared (a flattened copy of
 * one costs little), so the texts every record repeats (a rail's notice, a fallback's reason) cost nothing.
 */
const maxCompared = 256
/** Differences to the template's integer beyond this are kept by reference (their zig-zag stays a safe integer). */
const maxDelta = 2 ** 50

/** A packer: `pack` returns `undefined` when the record is better kept as it is (its templates are all taken). */
export interface Packer {
  readonly pack: (value: unknown, key: unknown) => Packed | undefined
  readonly unpack: (packed: Packed) => unknown
}

/**
 * A packer with its own templates (at most `maxTemplates` of them). `classes`: constructors whose instances are
 * flattened like plain objects (their state must be their own enumerable fields).
 */
export const make = (options: {
  readonly classes: ReadonlyArray<abstract new(...args: never) => object>
  readonly maxTemplates: number
}): Packer => {
  const prototypes = new Map<object, number>(options.classes.map((c, i) => [c.prototype as object, i]))
  const templates = new Map<string, Template>()

  /** The signature of `value` appended to `sig`, its leaves pushed to `leaves`. */
  const flatten = (value: unknown, depth: number, leaves: Array<unknown>): string => {
    if (typeof value !== "object" || value === null || depth >= maxDepth || Object.isFrozen(value)) {
      leaves.push(value)
      return "_"
    }
    const proto = Object.getPrototypeOf(value) as object | null
    if (Array.isArray(value)) {
      if (proto !== Array.prototype || value.length > maxWidth) {
        leaves.push(value)
        return "_"
      }
      let sig = "["
      for (let i = 0; i < value.length; i++) sig += flatten(value[i], depth + 1, leaves) + ","
      return sig + "]"
    }
    const classIndex = proto === Object.prototype || proto === null ? -1 : prototypes.get(proto)
    const keys = Object.keys(value)
    if (classIndex === undefined || keys.length > maxWidth) {
      leaves.push(value)
      return "_"
    }
    let sig = classIndex === -1 ? (proto === null ? "{n" : "{") : `{c${classIndex};`
    for (const key of keys) {
      // Length-prefixed, so no key can be mistaken for another (cheaper than quoting it: ~20 % of a pack).
      sig += key.length + "," + key + ":" + flatten((value as Record<string, unknown>)[key], depth + 1, leaves) + ","
    }
    return sig + "}"
  }

  /** The shape of the value just flattened, read back from the value itself (same walk, same leaf order). */
  const shapeOf = (value: unknown, depth: number): Shape => {
    if (typeof value !== "object" || value === null || depth >= maxDepth || Object.isFrozen(value)) return leafShape
    const proto = Object.getPrototypeOf(value) as object | null
    if (Array.isArray(value)) {
      if (proto !== Array.prototype || value.length > maxWidth) return leafShape
      return { _tag: "array", items: value.map((item) => shapeOf(item, depth + 1)) }
    }
    const plain = proto === Object.prototype || proto === null
    const keys = Object.keys(value)
    if ((!plain && !prototypes.has(proto)) || keys.length > maxWidth) return leafShape
    return {
      _tag: "object",
      proto: proto === Object.prototype ? undefined : proto ?? nullProto,
      keys,
      fields: keys.map((key) => shapeOf((value as Record<string, unknown>)[key], depth + 1))
    }
  }

  const pack = (value: unknown, key: unknown): Packed | undefined => {
    const leaves: Array<unknown> = []
    const sig = flatten(value, 0, leaves)
    let template = templates.get(sig)
    if (template === undefined) {
      if (templates.size >= options.maxTemplates) return undefined
      template = { shape: shapeOf(value, 0), leaves }
      templates.set(sig, template)
    }
    const codes: Array<number> = []
    const packed: [Template, string, unknown, ...Array<unknown>] = [template, "", key]
    let last = -1
    for (let i = 0; i < leaves.length; i++) {
      const leaf = leaves[i]
      const base = template.leaves[i]
      if (!(typeof leaf === "string" && leaf.length > maxCompared) && Object.is(leaf, base)) continue
      const gap = i - last - 1
      last = i
      const delta = typeof leaf === "number" && typeof base === "number" && Number.isSafeInteger(leaf) &&
          Number.isSafeInteger(base) && !Object.is(leaf, -0)
        ? leaf - base
        : undefined
      if (delta !== undefined && Math.abs(delta) <= maxDelta) {
        varint(codes, gap * 2 + 1)
        varint(codes, delta >= 0 ? delta * 2 : -delta * 2 - 1)
      } else {
        varint(codes, gap * 2)
        packed.push(leaf)
      }
    }
    packed[1] = text(codes)
    // Exact: an array grown by pushes keeps room for more, and the store keeps this one for the life of the process.
    return packed.slice() as unknown as Packed
  }

  const unpack = ([template, differences, _key, ...references]: Packed): unknown => {
    const leaves = template.leaves.slice()
    let at = -1
    let reference = 0
    let cursor = 0
    const next = (): number => {
      let value = 0
      let scale = 1
      for (;;) {
        const code = differences.charCodeAt(cursor++)
        value += (code & 0x7f) * scale
        if (code < 0x80) return value
        scale *= 0x80
      }
    }
    while (cursor < differences.length) {
      const head = next()
      at += Math.floor(head / 2) + 1
      if (head % 2 === 1) {
        const zigzag = next()
        leaves[at] = (leaves[at] as number) + (zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2)
      } else {
        leaves[at] = references[reference++]
      }
    }
    let leaf = 0
    const build = (shape: Shape): unknown => {
      switch (shape._tag) {
        case "leaf":
          return leaves[leaf++]
        case "array":
          return shape.items.map(build)
        case "object": {
          const out: Record<string, unknown> = shape.proto === undefined
            ? {}
            : Object.create(shape.proto === nullProto ? null : shape.proto) as Record<string, unknown>
          for (let i = 0; i < shape.keys.length; i++) out[shape.keys[i]!] = build(shape.fields[i]!)
          return out
        }
      }
    }
    return build(template.shape)
  }

  return { pack, unpack }
}

/** Stands for a `null` prototype in a shape (`undefined` there means `Object.prototype`). */
const nullProto: object = Object.freeze({})

const varint = (codes: Array<number>, value: number): void => {
  let rest = value
  while (rest >= 0x80) {
    codes.push((rest % 0x80) | 0x80)
    rest = Math.floor(rest / 0x80)
  }
  codes.push(rest)
}

/** Char codes below 256 as one flat one-byte string (in chunks: `fromCharCode` takes its codes as arguments). */
const text = (codes: ReadonlyArray<number>): string => {
  if (codes.length <= 4096) return String.fromCharCode(...codes)
  let out = ""
  for (let i = 0; i < codes.length; i += 4096) out += String.fromCharCode(...codes.slice(i, i + 4096))
  // A long concatenation is a tree of pieces; a record keeps it for the life of the store, flat.
  return out.length > 0 ? JSON.parse(JSON.stringify(out)) as string : out
}

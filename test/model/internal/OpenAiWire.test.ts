import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc, Schema } from "effect"
import { Chunk, isChunk } from "../../../src/model/internal/openAiWire.js"

const decode = Schema.decodeUnknownEither(Chunk)

/** Values shaped like chunks, right or slightly wrong, so both answers of the check are met often. */
const maybe = <A>(arb: fc.Arbitrary<A>) => fc.oneof(arb, fc.constant(null), fc.constant(undefined), fc.jsonValue())
const text = maybe(fc.string())
const count = maybe(fc.oneof(fc.integer(), fc.double({ noNaN: true })))
const toolCall = fc.record({
  index: count,
  id: text,
  type: text,
  function: maybe(fc.record({ name: text, arguments: fc.jsonValue() }, { requiredKeys: [] }))
}, { requiredKeys: [] })
const chunk = fc.record({
  id: text,
  model: text,
  choices: maybe(fc.array(
    fc.record({
      delta: maybe(fc.record({
        content: text,
        refusal: text,
        reasoning_content: fc.jsonValue(),
        tool_calls: maybe(fc.array(toolCall, { maxLength: 2 }))
      }, { requiredKeys: [] })),
      finish_reason: text
    }, { requiredKeys: [] }),
    { maxLength: 2 }
  )),
  usage: maybe(fc.record({
    prompt_tokens: count,
    completion_tokens: count,
    prompt_tokens_details: maybe(fc.record({ cached_tokens: count }, { requiredKeys: [] }))
  }, { requiredKeys: [] })),
  error: fc.jsonValue(),
  extra: fc.jsonValue()
}, { requiredKeys: [] })

/** What the adapter reads of a chunk (OpenAiCompat's stream handler, usage.ts's `fromOpenAi`). */
const reads = (c: Chunk) => {
  const choice = c.choices?.[0]
  const delta = choice?.delta
  return {
    id: c.id,
    model: c.model,
    error: c.error,
    usage: c.usage === null || c.usage === undefined ? c.usage : [
      c.usage.prompt_tokens,
      c.usage.completion_tokens,
      c.usage.prompt_tokens_details?.cached_tokens,
      c.usage.completion_tokens_details?.reasoning_tokens
    ],
    choices: c.choices?.length,
    finish: choice?.finish_reason,
    delta: delta === null || delta === undefined ? delta : [
      delta.content,
      delta.refusal,
      delta.reasoning_content,
      delta.reasoning,
      delta.tool_calls?.map((t) => [t.index, t.id, t.type, t.function?.name, t.function?.arguments])
    ]
  }
}

describe("openAiWire.isChunk", () => {
  it.prop(
    "passes only what the Chunk schema decodes, and a passed value reads as its decoding does",
    [fc.oneof(chunk, fc.jsonValue())],
    ([value]) => {
      const decoded = decode(value)
      if (isChunk(value)) {
        expect(Either.isRight(decoded)).toBe(true)
        // What the adapter reads is the same either way (the decoding drops only unknown fields).
        expect(reads(value)).toEqual(reads(Either.getOrThrow(decoded)))
      }
    },
    { fastCheck: { numRuns: 2_000 } }
  )

  it("passes a plain streamed chunk and a usage chunk", () => {
    expect(isChunk({ id: "c1", model: "m", choices: [{ delta: { content: "Hi" }, finish_reason: null }] })).toBe(true)
    expect(isChunk({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } })).toBe(true)
    expect(isChunk({ choices: [{ delta: { content: 3 } }] })).toBe(false)
  })
})

/**
 * Renders an MCP tool result as the text the model sees.
 *
 * The transcript is text. Images, audio and resources cannot enter it as such, but dropping them silently would let
 * the model believe the tool returned nothing (and call it again): each becomes a short bracketed description with
 * its type, MIME type and size, and a text resource keeps its text. A resource link says how to read it (the core
 * `read_resource` tool, with its server). `structuredContent` is rendered as JSON only when
 * the result carries no text — servers usually repeat it as text, and the model needs it once.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { Attachment } from "../../domain/Message.js"

/** What `Client.callTool` resolves with. */
export type CallResult = Awaited<ReturnType<Client["callTool"]>>

type ContentResult = Extract<CallResult, { content: ReadonlyArray<unknown> }>
type Block = ContentResult["content"][number]

const hasContent = (result: CallResult): result is ContentResult => Array.isArray(result["content"])

/** The decoded size of base64 `data`, without decoding it. */
export const base64Bytes = (data: string): number => {
  const trimmed = data.replace(/\s/g, "")
  const padding = trimmed.endsWith("==") ? 2 : trimmed.endsWith("=") ? 1 : 0
  return Math.max(0, Math.floor((trimmed.length * 3) / 4) - padding)
}

/** The call that reads a linked resource, for the model to copy: the core `read_resource` tool with its server. */
const readHint = (server: string | undefined, uri: string): string =>
  server === undefined ? "" : `; read it with read_resource ${JSON.stringify({ server, uri })}`

const describe = (block: Block, server: string | undefined): string => {
  switch (block.type) {
    case "text":
      return block.text
    case "image":
      return `[image: ${block.mimeType}, ${base64Bytes(block.data)} bytes]`
    case "audio":
      return `[audio: ${block.mimeType}, ${base64Bytes(block.data)} bytes]`
    case "resource": {
      const r = block.resource
      const mime = r.mimeType === undefined ? "" : `, ${r.mimeType}`
      return "text" in r
        ? `[resource: ${r.uri}${mime}]\n${r.text}`
        : `[resource: ${r.uri}${mime}, ${base64Bytes(r.blob)} bytes]`
    }
    case "resource_link":
      return `[resource link: ${block.name} ${block.uri}${block.mimeType === undefined ? "" : ` (${block.mimeType})`}${
        readHint(server, block.uri)
      }]`
    default:
      // A content type newer than this SDK: still say that something came back.
      return `[${String((block as { readonly type: unknown }).type)} content]`
  }
}

const json = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** The images and audio blocks of a result, as attachments (their descriptions stay in the text). */
const attachmentsOf = (result: ContentResult): ReadonlyArray<Attachment> => {
  const found: Array<Attachment> = []
  for (const block of result.content) {
    if (block.type === "image" || block.type === "audio") {
      found.push({ type: block.type, mimeType: block.mimeType, data: block.data })
    }
  }
  return found
}

/**
 * The text of a result, whether the server flagged it as an error, and its images and audio. A resource link names `server` in the
 * `read_resource` call that follows it (no hint without one). Never throws.
 */
export const render = (
  result: CallResult,
  server?: string
): { readonly text: string; readonly isError: boolean; readonly attachments: ReadonlyArray<Attachment> } => {
  if (!hasContent(result)) return { text: json(result["toolResult"]), isError: false, attachments: [] }
  const parts = result.content.map((block) => describe(block, server))
  const hasText = result.content.some((b) => b.type === "text" || (b.type === "resource" && "text" in b.resource))
  if (!hasText && result.structuredContent !== undefined) parts.push(json(result.structuredContent))
  const text = parts.length === 0 ? "(the tool returned no content)" : parts.join("\n")
  return { text, isError: result.isError === true, attachments: attachmentsOf(result) }
}

/**
 * An absolute http(s) URL, as configuration takes it (provider base URLs, MCP server URLs).
 */
import { Schema } from "effect"

/** A string that parses as an absolute `http://` or `https://` URL. */
export const HttpUrl = Schema.String.pipe(
  Schema.filter((s) => {
    try {
      const url = new URL(s)
      return url.protocol === "http:" || url.protocol === "https:"
    } catch {
      return false
    }
  }, { message: () => "an absolute http:// or https:// URL" })
)

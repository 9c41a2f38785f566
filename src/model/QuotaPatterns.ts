/**
 * QuotaPatterns — the one table of how each vendor says "you are out of money or over your usage limit".
 *
 * Prevents a session from retrying a bill. Vendors answer an exhausted quota with the same 429 (or 400) they use
 * for a per-minute throttle, so the status alone would retry it — for seconds, then fail over anyway — while
 * another provider could have answered at once. Only the body tells them apart, and each vendor words it its own
 * way, so every known wording lives here, with the vendor and an example body it must match (each example is a
 * test). A bare "quota" is NOT a pattern: Gemini and Azure say "quota" for per-minute throttles, which recover in
 * seconds and must be retried. Matching is on the lower-cased body, so patterns are lower case.
 */

/** One wording of an exhausted quota. */
export interface QuotaPattern {
  readonly vendor: "openai" | "anthropic" | "openrouter" | "any"
  readonly pattern: RegExp
  /** A body (or message) the vendor sends, which the pattern must classify as `quota`. */
  readonly example: string
}

/** Every known wording, per vendor. */
export const table: ReadonlyArray<QuotaPattern> = [
  {
    vendor: "openai",
    pattern: /insufficient_quota/,
    example: "{\"error\":{\"message\":\"You exceeded your current quota\",\"type\":\"insufficient_quota\"," +
      "\"code\":\"insufficient_quota\"}}"
  },
  {
    vendor: "openai",
    pattern: /exceeded your current quota/,
    example: "You exceeded your current quota, please check your plan and billing details."
  },
  {
    vendor: "openai",
    pattern: /billing_hard_limit_reached|billing hard limit/,
    example: "{\"error\":{\"code\":\"billing_hard_limit_reached\",\"message\":\"Billing hard limit has been reached\"}}"
  },
  {
    vendor: "anthropic",
    pattern: /credit balance/,
    example: "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Your credit balance is " +
      "too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.\"}}"
  },
  {
    vendor: "anthropic",
    pattern: /specified api usage limits|api usage limits/,
    example: "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"You have reached your " +
      "specified API usage limits. You will regain access on 2026-01-01 at 00:00 UTC.\"}}"
  },
  {
    vendor: "anthropic",
    pattern: /enforced_spend_limit_reached|spend(ing)?[_ ]limit/,
    example: "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"," +
      "\"details\":{\"error_code\":\"enforced_spend_limit_reached\"}}}"
  },
  {
    vendor: "anthropic",
    pattern: /billing_error/,
    example:
      "{\"type\":\"error\",\"error\":{\"type\":\"billing_error\",\"message\":\"Your account has a billing issue\"}}"
  },
  {
    vendor: "openrouter",
    pattern: /insufficient (credits|funds|balance)|out of credits/,
    example:
      "{\"error\":{\"code\":402,\"message\":\"Insufficient credits. Add more using https://openrouter.ai/credits\"}}"
  },
  {
    vendor: "any",
    pattern: /payment required|\bbilling\b/,
    example: "Payment Required: check your billing settings"
  }
]

const combined = new RegExp(table.map((entry) => entry.pattern.source).join("|"))

/** Whether `lowerCasedText` (a reply body or an error message, lower case) says a quota is exhausted. */
export const matches = (lowerCasedText: string): boolean => combined.test(lowerCasedText)

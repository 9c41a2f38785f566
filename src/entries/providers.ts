/**
 * `corral/providers` as Node loads it from the package: src/providers.ts behind `load`, so that a program without
 * @effect/platform-node (an optional peer) is told the line that installs it. The types are src/providers.ts's
 * (package.json `exports`); test/entries/OptionalPeers.test.ts keeps the names equal.
 */
import { load } from "../internal/optionalPeers.js"

const entry = await load("corral/providers", () => import("../providers.js"))

export const {
  Anthropic,
  classifyErrorType,
  classifyStatus,
  defaultAttempt,
  defaultTier,
  describe,
  disposition,
  ErrorKind,
  layerHttpClient,
  OpenAiCompat,
  OpenAiResponses,
  parseRetryAfter,
  ProviderConfig,
  ProviderError,
  ProviderExhausted,
  Providers,
  StormGuard,
  withProvider
} = entry

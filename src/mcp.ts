/**
 * `corral/mcp` — entry point; filled by the public-surface work.
 */
export {}

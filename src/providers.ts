/**
 * `corral/providers` — entry point; filled by the public-surface work.
 */
export {}

#!/usr/bin/env node
/* global URL */
// The `corral` command: runs the TypeScript CLI (src/cli/main.ts) through tsx, with no build step.
import { register } from "tsx/esm/api"

register()
await import(new URL("../src/cli/main.ts", import.meta.url).href)

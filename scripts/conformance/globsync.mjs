/* global URL */
/**
 * An `--import` hook for the MCP conformance CLI (@modelcontextprotocol/conformance 0.1.16), which imports
 * `globSync` from `fs`: Node 22 has it, Node 20 does not, and the CLI then fails to load at all ("The requested
 * module 'fs' does not provide an export named 'globSync'"). A builtin's ESM exports are fixed, so assigning
 * `fs.globSync` is not enough: this registers a resolve hook that hands the conformance CLI (and only it) a module
 * re-exporting `node:fs` plus a `globSync` built on tinyglobby (already installed). On a Node that has
 * `fs.globSync`, nothing is registered.
 *
 * Usage: node --import ./scripts/conformance/globsync.mjs node_modules/@modelcontextprotocol/conformance/dist/index.js
 */
import fs from "node:fs"
import { register } from "node:module"

if (typeof fs.globSync !== "function") {
  register(new URL("./globsync-hooks.mjs", import.meta.url))
}

/**
 * main — `corral serve` in one expression: the configuration in, the server up until the process is interrupted
 * (SIGTERM/SIGINT), then the layers close in order: drain, HTTP server, actors, store, database.
 */
import { Effect } from "effect"
import * as Config from "../config/Config.js"
import * as Server from "./Server.js"

/** Loads the configuration and serves until interrupted. Fails with `ConfigInvalid` or what `Server.layer` fails with. */
export const main = Effect.flatMap(Config.load, Server.launch)

/** Serves `settings` until interrupted (for hosts that build settings themselves). */
export const serve = (settings: Config.Settings) => Server.launch(settings)

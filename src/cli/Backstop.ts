/**
 * The forced exit after SIGTERM/SIGINT, should anything still hang once every bound of the shutdown has passed.
 *
 * The drain and the closing of the layers bound themselves (`server.shutdownTimeoutMs` plus 2 s, `Server.launch`);
 * the backstop sits 10 s beyond that so it never pre-empts a shutdown that keeps its bound — a fixed 60 s backstop
 * used to exit 1 first whenever `shutdownTimeoutMs` was 58 s or more.
 */

/** The default bound, for commands that set none (their own cancellation is quick). */
let boundMs = 60_000

/** Makes the backstop wait at least `ms` after the signal (a command that knows its shutdown bound calls this). */
export const atLeast = (ms: number): void => {
  boundMs = Math.max(boundMs, ms)
}

/** Arms the backstop: exit 1 after the bound, unless the process exits first (the timer does not keep it alive). */
export const arm = (): void => {
  setTimeout(() => process.exit(1), boundMs).unref()
}

/**
 * A client written only from the served OpenAPI document: `./api.js` is the `paths` type openapi-typescript
 * generates from it during `scripts/openapi-check.sh` (it exists only there, so the project's own tsconfig leaves
 * this file out). It compiles when the document describes the calls a client makes — publish an agent, start a
 * session, read it, list its turns — and the `@ts-expect-error` lines prove the types are real, not `any`.
 */
import createClient from "openapi-fetch"
import type { paths } from "./api.js"

const corral = createClient<paths>({ baseUrl: "http://127.0.0.1:8080" })

/** Publishes an agent with its own exit check and answers its version. */
export const publish = async (): Promise<number | undefined> => {
  const { data } = await corral.POST("/v1/agents", {
    body: {
      id: "triage",
      version: 1,
      name: "Triage",
      instructions: "Find the cause of the incident.",
      tools: ["demo_status"],
      limits: { modelCallsPerBurst: 8 },
      exitPolicy: {
        checks: [{ name: "few_tools", at: "after_tools", metric: "toolCallsBurst", atLeast: 6, reason: "tool_budget" }]
      }
    }
  })
  return data?.version
}

/** Starts a session and waits for it to land: the 200 answer is the session view, the 202 says where to follow. */
export const start = async (): Promise<string | undefined> => {
  const { data, error } = await corral.POST("/v1/sessions", {
    params: { query: { wait: "true" } },
    body: { agentId: "triage", scope: "incident:DEMO-1", prompt: "Why is checkout failing?" }
  })
  if (error !== undefined) return undefined
  return "sessionId" in data ? data.sessionId : data.id
}

/** Reads a session: its status is one of the documented literals. */
export const status = async (id: string) => {
  const { data } = await corral.GET("/v1/sessions/{id}", { params: { path: { id } } })
  const current: "idle" | "running" | "awaiting_confirmation" | "interrupted" | undefined = data?.status
  return current
}

/** Lists the turns after a sequence number. */
export const turns = async (id: string, after: number) => {
  const { data } = await corral.GET("/v1/sessions/{id}/turns", {
    params: { path: { id }, query: { after: String(after) } }
  })
  return (data?.turns ?? []).map((turn) => turn.seq)
}

/** Calls the document does not allow: each line must fail to compile. */
export const refused = async () => {
  // @ts-expect-error a session needs a prompt
  await corral.POST("/v1/sessions", { body: { agentId: "triage", scope: "incident:DEMO-1" } })
  // @ts-expect-error reading a session needs its id
  await corral.GET("/v1/sessions/{id}", {})
  await corral.POST("/v1/agents", {
    body: {
      id: "triage",
      version: 2,
      name: "Triage",
      instructions: "Find the cause.",
      // @ts-expect-error an exit check ends a burst with a halt reason, never `completed`
      exitPolicy: { checks: [{ name: "x", at: "after_tools", metric: "repeats", atLeast: 2, reason: "completed" }] }
    }
  })
  // @ts-expect-error no such route
  await corral.GET("/v1/sessions/{id}/nothing", { params: { path: { id: "ses_1" } } })
}

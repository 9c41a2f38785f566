/*
 * Corral viewer — plain browser JavaScript, served as is (no build step).
 *
 * /ui lists the org's sessions and starts new ones; /ui/sessions/{id} follows one session's Server-Sent Events:
 * each turn as it is persisted, tool calls as they start and finish, rail notices, streamed text, the exit reason
 * and the report. The stream is read with fetch (not EventSource) so the API key travels in the Authorization
 * header, never in a URL; on a dropped connection it resumes with Last-Event-ID, and turns are de-duplicated by
 * sequence number. The session page's rails (gauges and waterfall) are drawn by rails.js from the session's
 * trajectories, re-read after each event and every second while a burst runs. Everything from the server is inserted
 * as text, never as HTML. The API helpers are shared with the operations page (ops.js) as `window.CorralViewer`.
 */
/* global document, window, fetch, localStorage, location, TextDecoder, AbortController, setTimeout, setInterval,
   URLSearchParams */
"use strict"
;(() => {
  const KEY = "corral.apiKey"
  const apiKey = () => localStorage.getItem(KEY) || ""
  const $ = (id) => document.getElementById(id)

  const authHeaders = (extra) => {
    const headers = Object.assign({}, extra)
    const key = apiKey()
    if (key) headers.authorization = `Bearer ${key}`
    return headers
  }

  const describe = (status, body) => {
    if (!body || typeof body !== "object") return `HTTP ${status}`
    const lines = [`${body._tag || "Error"} (HTTP ${status}): ${body.message || ""}`]
    for (const issue of body.issues || []) {
      const path = Array.isArray(issue.path) ? issue.path.join(".") : issue.path
      lines.push(`  ${path || "(body)"}: ${issue.message}`)
    }
    return lines.join("\n")
  }

  const api = async (method, path, body) => {
    const response = await fetch(path, {
      method,
      headers: authHeaders(body === undefined ? {} : { "content-type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body)
    })
    const text = await response.text()
    let json = null
    try {
      json = text ? JSON.parse(text) : null
    } catch {
      json = null
    }
    if (!response.ok) throw new Error(describe(response.status, json))
    return json
  }

  const el = (tag, props, ...children) => {
    const node = document.createElement(tag)
    for (const [name, value] of Object.entries(props || {})) {
      if (name === "class") node.className = value
      else if (name.startsWith("data-") || name.startsWith("aria-") || name === "role") node.setAttribute(name, value)
      else node[name] = value
    }
    for (const child of children) if (child !== undefined && child !== null) node.append(child)
    return node
  }

  const badgeClass = (status, exit, owner) => {
    if (status === "running" && owner === "unknown") return "badge unowned"
    if (status === "running") return "badge running"
    if (status === "awaiting_confirmation") return "badge wait"
    if (exit === "completed") return "badge completed"
    if (exit) return "badge bad"
    return "badge"
  }

  // A running session no live cluster node owns (its node died or was cut off, not taken over yet) says so.
  const unownedNote = "No live node owns this session: the node running it died or was cut off, and no other node " +
    "has taken it over yet. Nothing runs its burst; once taken over it reads interrupted (resume with a follow-up)."
  const statusBadge = (view) => {
    const unowned = view.status === "running" && view.owner === "unknown"
    return el("span", {
      class: badgeClass(view.status, view.exitReason, view.owner),
      textContent: unowned ? `${view.status} · owner unknown` : view.status,
      ...(unowned ? { title: unownedNote } : {})
    })
  }

  const when = (millis) => new Date(millis).toLocaleString()

  // ---- /ui ---------------------------------------------------------------------------------------------------

  const indexPage = () => {
    const keyInput = $("apikey")
    keyInput.value = apiKey()
    keyInput.addEventListener("change", () => {
      localStorage.setItem(KEY, keyInput.value.trim())
      loadAgents()
      loadSessions(true)
    })
    $("scope").value = `demo:${Math.random().toString(36).slice(2, 8)}`

    const loadAgents = async () => {
      const select = $("agent")
      try {
        const { agents } = await api("GET", "/v1/agents")
        select.replaceChildren(...agents.map((a) => el("option", { value: a.id, textContent: `${a.id} — ${a.name}` })))
        if (agents.some((a) => a.id === "demo")) select.value = "demo"
      } catch (error) {
        $("start-error").textContent = error.message
      }
    }

    let cursor
    const loadSessions = async (reset) => {
      if (reset) {
        cursor = undefined
        $("sessions").replaceChildren()
      }
      try {
        const query = new URLSearchParams({ limit: "25" })
        if (cursor) query.set("cursor", cursor)
        const page = await api("GET", `/v1/sessions?${query}`)
        for (const s of page.sessions) {
          const link = el("a", { href: `/ui/sessions/${encodeURIComponent(s.id)}`, textContent: s.id })
          $("sessions").append(el(
            "tr",
            {},
            el("td", {}, link),
            el("td", { textContent: s.agentId }),
            el("td", { textContent: s.scope }),
            el("td", {}, statusBadge(s)),
            el("td", { textContent: s.exitReason || "" }),
            el("td", { class: "muted", textContent: when(s.createdAt) })
          ))
        }
        cursor = page.nextCursor
        $("more").hidden = !cursor
        $("list-error").textContent = ""
      } catch (error) {
        $("list-error").textContent = error.message
      }
    }
    $("more").addEventListener("click", () => loadSessions(false))

    $("start-form").addEventListener("submit", async (event) => {
      event.preventDefault()
      const button = $("start")
      button.disabled = true
      $("start-error").textContent = ""
      try {
        const accepted = await api("POST", "/v1/sessions", {
          agentId: $("agent").value,
          scope: $("scope").value.trim(),
          prompt: $("prompt").value.trim()
        })
        location.href = accepted.viewer
      } catch (error) {
        $("start-error").textContent = error.message
        button.disabled = false
      }
    })

    loadAgents()
    loadSessions(true)
  }

  // ---- /ui/sessions/{id} -------------------------------------------------------------------------------------

  const sessionPage = () => {
    const sessionId = decodeURIComponent(location.pathname.split("/").pop() || "")
    const base = `/v1/sessions/${encodeURIComponent(sessionId)}`
    $("session-id").textContent = sessionId
    const seen = new Set()
    /** callId → the element showing that call's state. */
    const calls = new Map()
    let lastId = 0
    let backoff = 500

    const setCall = (callId, state, label) => {
      const node = calls.get(callId)
      if (!node) return
      node.className = `state ${state}`
      node.textContent = label
    }

    const renderView = (view) => {
      $("agent").textContent = `${view.agentId} v${view.agentVersion}`
      $("scope").textContent = view.scope
      const status = $("status")
      const badge = statusBadge(view)
      status.textContent = badge.textContent
      status.className = badge.className
      status.title = badge.title
      $("exit").textContent = view.status === "running" ? "" : view.exitReason || ""
      $("usage").textContent = usageLine(view)
      $("cancel").hidden = view.status !== "running"
      if (view.report) renderReport(view.report)
      renderPending(view.pending || [])
    }

    // Cache reads and writes are parts of the input, reasoning a part of the output: said only when there are some.
    const usageLine = (view) => {
      const u = view.usage
      const parts = [`${view.modelCalls} model calls`, `${view.toolCalls} tool calls`]
      const cache = []
      if (u.cacheReadTokens) cache.push(`${u.cacheReadTokens} cache read`)
      if (u.cacheWriteTokens) cache.push(`${u.cacheWriteTokens} cache write`)
      const input = `${u.inputTokens} in${cache.length > 0 ? ` (${cache.join(", ")})` : ""}`
      const output = `${u.outputTokens} out${u.reasoningTokens ? ` (${u.reasoningTokens} reasoning)` : ""}`
      parts.push(`${input} / ${output} tokens`)
      // Money is integer micro-dollars on the wire; shown as dollars, exactly.
      if (view.costMicros) parts.push(`$${(view.costMicros / 1e6).toFixed(6)}`)
      return parts.join(" · ")
    }

    // A turn's reasoning, collapsed: the provider's own record, shown as text where it is text.
    const reasoningText = (part) => {
      switch (part.type) {
        case "thinking":
          return part.thinking
        case "redacted_thinking":
          return "[redacted by the provider]"
        case "reasoning":
          return part.summary.length > 0 ? part.summary.join("\n\n") : "[encrypted by the provider; no summary]"
        case "reasoning_text":
          return part.text
        default:
          return `[${part.type}]`
      }
    }
    const renderReasoning = (parts) => {
      const providers = [...new Set(parts.map((p) => p.provider))].join(", ")
      return el(
        "details",
        { class: "reasoning", "data-reasoning": String(parts.length) },
        el("summary", {
          textContent: `reasoning · ${providers} · ${parts.length} part${parts.length === 1 ? "" : "s"}`
        }),
        ...parts.map((p) => el("div", { class: "text", "data-type": p.type, textContent: reasoningText(p) }))
      )
    }

    const renderReport = (report) => {
      $("report").hidden = false
      $("report-source").textContent = `source: ${report.source}${
        report.fallbackReason ? ` (${report.fallbackReason})` : ""
      } · exit: ${report.exitReason}`
      $("report-data").textContent = JSON.stringify(report.data, null, 2)
    }

    const renderPending = (pending) => {
      $("pending-section").hidden = pending.length === 0
      $("pending").replaceChildren(...pending.map((p) => {
        const decide = (decision) => async () => {
          try {
            // Tokens are shown once (to the response that issued them): ask for a fresh one when this page has none.
            let token = p.token
            if (!token) {
              const renewed = await api("POST", `${base}/approvals/tokens`)
              token = (renewed.pending || []).find((q) => q.callId === p.callId)?.token
              if (!token) throw new Error("this write no longer waits for a decision")
            }
            await api("POST", `${base}/approvals`, { token, decision })
            refresh()
          } catch (error) {
            $("error").textContent = error.message
          }
        }
        return el(
          "div",
          { class: "pending" },
          el("div", { class: "call", textContent: `${p.tool}(${p.arguments})` }),
          el("button", { type: "button", textContent: "Approve", onclick: decide("approve") }),
          " ",
          el("button", { type: "button", class: "secondary", textContent: "Reject", onclick: decide("reject") })
        )
      }))
    }

    const renderTurn = (turn) => {
      if (seen.has(turn.seq)) return
      seen.add(turn.seq)
      const entry = turn.entry
      const node = el("div", { class: `turn ${entry.kind}`, "data-seq": String(turn.seq), "data-kind": entry.kind })
      const who = {
        user: "user",
        assistant: "assistant",
        tool_results: "tool results",
        notice: `notice · ${entry.rail}`
      }
      node.append(el("div", { class: "who", textContent: `#${turn.seq} ${who[entry.kind] || entry.kind}` }))
      if (entry.kind === "user") {
        node.append(el("div", { class: "text", textContent: entry.text }))
        if (entry.context) node.append(el("div", { class: "result", textContent: entry.context }))
      } else if (entry.kind === "assistant") {
        $("typing").textContent = ""
        if (entry.reasoning && entry.reasoning.length > 0) node.append(renderReasoning(entry.reasoning))
        if (entry.text) node.append(el("div", { class: "text", textContent: entry.text }))
        for (const call of entry.toolCalls) {
          const state = el("span", { class: "state", textContent: "requested" })
          calls.set(call.id, state)
          node.append(el("div", { class: "call", "data-call": call.id }, `${call.name}(${call.arguments})`, state))
        }
      } else if (entry.kind === "tool_results") {
        for (const result of entry.results) {
          setCall(result.callId, result.status, result.status === "ok" ? "done" : result.status.replace(/_/g, " "))
          node.append(el("div", { class: "call" }, `${result.name} → ${result.status}`))
          node.append(el("div", { class: "result", textContent: result.content }))
        }
      } else if (entry.kind === "notice") {
        node.append(el("div", { class: "text", textContent: entry.text }))
      }
      $("turns").append(node)
    }

    const refresh = async () => {
      try {
        renderView(await api("GET", base))
      } catch (error) {
        $("error").textContent = error.message
      }
      loadRails()
    }

    // The rails (gauges and waterfall) come from the trajectories, saved as each burst goes: re-read after every
    // event that moves them (at most one read in flight, one more queued), and every second while a burst runs.
    let view
    let trajectories = []
    let railsBusy = false
    let railsAgain = false
    const drawRails = () => {
      if (!window.CorralRails) return
      window.CorralRails.renderGauges($("gauges"), trajectories, view, Date.now())
      window.CorralRails.renderWaterfalls($("waterfalls"), trajectories, Date.now())
    }
    const loadRails = async () => {
      if (railsBusy) {
        railsAgain = true
        return
      }
      railsBusy = true
      try {
        const [latest, list] = await Promise.all([api("GET", base), api("GET", `${base}/trajectory`)])
        view = latest
        trajectories = list.trajectories
        drawRails()
      } catch (error) {
        $("error").textContent = error.message
      } finally {
        railsBusy = false
        if (railsAgain) {
          railsAgain = false
          loadRails()
        }
      }
    }
    setInterval(() => {
      const running = trajectories.some((t) => t.open) || (view && view.status === "running")
      if (running) loadRails()
    }, 1000)

    const handle = (name, data) => {
      switch (name) {
        case "session":
          renderView(data)
          break
        case "turn":
        case "notice":
          renderTurn(data.turn)
          loadRails()
          break
        case "tool_start":
          setCall(data.callId, "running", "running…")
          loadRails()
          break
        case "tool_progress":
          // Live-only: the call's badge says how far it got; the result turn replaces it.
          setCall(
            data.callId,
            "running",
            `running… ${data.progress}${data.total === undefined ? "" : ` of ${data.total}`}` +
              (data.message === undefined ? "" : ` (${data.message})`)
          )
          break
        case "tool_log":
          setCall(data.callId, "running", `running… [${data.level}] ${data.message.slice(0, 200)}`)
          break
        case "delta":
          $("typing").textContent += data.text
          break
        case "exit":
          $("exit").textContent = data.reason
          $("typing").textContent = ""
          refresh()
          break
        case "report":
          renderReport(data.report)
          refresh()
          break
        case "error":
          // A burst that failed on infrastructure (`code`), or the stream itself breaking.
          if (data.code) $("error").textContent = `${data.code}: ${data.message}`
          else $("conn").textContent = "stream interrupted; reconnecting…"
          break
      }
    }

    const dispatch = (block) => {
      let name = "message"
      let id
      const data = []
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue
        const colon = line.indexOf(":")
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
        if (field === "event") name = value
        else if (field === "data") data.push(value)
        else if (field === "id") id = value
      }
      if (id !== undefined && /^\d+$/.test(id)) lastId = Number(id)
      if (data.length > 0) handle(name, JSON.parse(data.join("\n")))
    }

    const follow = async () => {
      const controller = new AbortController()
      window.addEventListener("pagehide", () => controller.abort(), { once: true })
      try {
        const response = await fetch(`${base}/events`, {
          headers: authHeaders({ accept: "text/event-stream", "last-event-id": String(lastId) }),
          signal: controller.signal
        })
        if (!response.ok || !response.body) {
          const text = await response.text()
          let body = null
          try {
            body = JSON.parse(text)
          } catch {
            body = null
          }
          throw new Error(describe(response.status, body))
        }
        $("conn").textContent = "live"
        backoff = 500
        const reader = response.body.getReader()
        const decoder = new TextDecoder()
        let buffer = ""
        while (true) {
          const { done, value } = await reader.read()
          if (done) break
          buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n")
          let cut
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            dispatch(buffer.slice(0, cut))
            buffer = buffer.slice(cut + 2)
          }
        }
        $("conn").textContent = "disconnected; reconnecting…"
      } catch (error) {
        if (controller.signal.aborted) return
        $("conn").textContent = "reconnecting…"
        $("error").textContent = error.message
      }
      backoff = Math.min(backoff * 2, 10000)
      setTimeout(follow, backoff)
    }

    $("cancel").addEventListener("click", async () => {
      try {
        renderView(await api("POST", `${base}/cancel`))
      } catch (error) {
        $("error").textContent = error.message
      }
    })
    $("followup").addEventListener("submit", async (event) => {
      event.preventDefault()
      const text = $("followup-text").value.trim()
      if (!text) return
      try {
        await api("POST", `${base}/messages`, { text })
        $("followup-text").value = ""
        $("exit").textContent = ""
        refresh()
      } catch (error) {
        $("error").textContent = error.message
      }
    })

    refresh()
    follow()
  }

  // Shared with the operations page (ops.js), which loads this file first.
  window.CorralViewer = { KEY, apiKey, api, el, badgeClass, describe }
  if (document.body.dataset.page === "session") sessionPage()
  else if (document.body.dataset.page === "index") indexPage()
})()

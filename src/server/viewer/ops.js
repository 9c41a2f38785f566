/*
 * Corral viewer — the operations page (/ui/ops), plain browser JavaScript served as is. Loads after viewer.js
 * (its API helpers, `window.CorralViewer`).
 *
 * Every 2 s it reads: `/metrics` (bursts running, session actors, approvals pending, store append latency — this
 * process's numbers), `GET /v1/exits` (bursts of the last hour by exit reason), `GET /v1/providers` (each provider's
 * state: healthy, throttled with the gate's release time, circuit open), `GET /v1/tools` (each MCP server's state and
 * last error), and the org's running sessions and sessions whose writes wait for a decision (`GET /v1/sessions`).
 * A failed read shows its error and the next refresh tries again. Everything is inserted as text.
 */
/* global document, window, fetch, setInterval, URLSearchParams */
"use strict"
;(() => {
  const { KEY, api, apiKey, el } = window.CorralViewer
  const $ = (id) => document.getElementById(id)
  const REFRESH_MS = 2000

  const ago = (millis) => {
    const s = Math.max(0, Math.round(millis / 1000))
    if (s < 120) return `${s} s`
    if (s < 7200) return `${Math.floor(s / 60)} min ${s % 60} s`
    return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
  }
  const ms = (seconds) =>
    seconds >= 1
      ? `${seconds.toFixed(2)} s`
      : seconds >= 0.01
      ? `${Math.round(seconds * 1000)} ms`
      : `${(seconds * 1000).toFixed(1)} ms`

  /** Prometheus text → [{ name, labels, value }]. */
  const parseMetrics = (text) => {
    const samples = []
    for (const line of text.split("\n")) {
      if (line === "" || line.startsWith("#")) continue
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$/.exec(line)
      if (!match) continue
      const labels = {}
      for (const pair of (match[3] || "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[pair[1]] = pair[2]
      }
      samples.push({ name: match[1], labels, value: match[4] === "+Inf" ? Infinity : Number(match[4]) })
    }
    return samples
  }
  const sum = (samples, name) => samples.filter((s) => s.name === name).reduce((n, s) => n + s.value, 0)

  let previousAppend
  const renderMetrics = (samples) => {
    $("bursts-active").textContent = String(sum(samples, "corral_bursts_active"))
    $("actors").textContent = String(sum(samples, "corral_actors_active"))
    const base = "corral_store_append_duration_seconds"
    const count = sum(samples, `${base}_count`)
    const total = sum(samples, `${base}_sum`)
    if (count === 0) {
      $("append").textContent = "–"
      $("append-detail").textContent = "no append yet"
      return
    }
    // The 95th percentile as the histogram knows it: the first bucket holding 95% of the appends.
    const buckets = samples.filter((s) => s.name === `${base}_bucket`)
      .map((s) => ({ le: s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), n: s.value }))
      .sort((a, b) => a.le - b.le)
    const p95 = buckets.find((b) => b.n >= 0.95 * count)
    $("append").textContent = ms(total / count)
    const recent = previousAppend && count > previousAppend.count
      ? ` · last ${REFRESH_MS / 1000} s: ${count - previousAppend.count} at ${
        ms((total - previousAppend.total) / (count - previousAppend.count))
      }`
      : ""
    $("append-detail").textContent = `p95 ${p95 && p95.le !== Infinity ? `≤ ${ms(p95.le)}` : "> 2 min"} · ${count} ` +
      `appends since start${recent}`
    previousAppend = { count, total }
  }

  const renderExits = (exits) => {
    $("exits-window").textContent = `${exits.total} ${exits.total === 1 ? "burst" : "bursts"} ended from ${
      new Date(exits.from).toLocaleTimeString()
    } to ${new Date(exits.to).toLocaleTimeString()} (this process)`
    const rows = Object.entries(exits.byReason).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1])
    const max = Math.max(1, ...rows.map(([, n]) => n))
    $("exits").replaceChildren(...rows.map(([reason, n]) => {
      const fill = el("div", {
        class: reason === "completed" || reason === "confirmation_pending" ? "fill" : "fill bad"
      })
      fill.style.width = `${(100 * n) / max}%`
      return el(
        "div",
        { class: "exit-bar", "data-reason": reason },
        el("span", { textContent: reason }),
        el("div", { class: "track" }, fill),
        el("span", { class: "numbers", textContent: String(n) })
      )
    }))
    if (rows.length === 0) {
      $("exits").replaceChildren(el("p", { class: "muted", textContent: "No burst ended in the last hour." }))
    }
  }

  const renderProviders = (view) => {
    const now = Date.parse(view.at)
    $("providers").replaceChildren(...view.providers.map((p) => {
      let state = p.state
      if (p.state === "throttled") {
        state = `throttled until ${new Date(p.gateUntil).toLocaleTimeString()} (${
          ago(Date.parse(p.gateUntil) - now)
        } more)`
      } else if (p.state === "circuit_open") {
        state = `circuit open until ${new Date(p.openUntil).toLocaleTimeString()} (${
          ago(Date.parse(p.openUntil) - now)
        } more)`
      }
      const history = p.storms === undefined
        ? ""
        : `${p.storms} storms · ${p.gated} gated · ${p.opened} circuit openings · ${p.rejected} failed fast`
      return el(
        "tr",
        { "data-provider": p.name, "data-state": p.state },
        el("td", { textContent: p.name }),
        el("td", { textContent: p.model }),
        el("td", { textContent: p.tiers.join(", ") }),
        el("td", {}, el("span", { class: `state ${p.state}`, textContent: state })),
        el("td", { textContent: p.waiting === undefined ? "" : String(p.waiting) }),
        el("td", { class: "muted", textContent: history })
      )
    }))
    if (view.providers.length === 0) {
      $("providers").replaceChildren(
        el("tr", {}, el("td", { colSpan: 6, class: "muted", textContent: "No providers." }))
      )
    }
  }

  const renderServers = (tools) => {
    const now = Date.now()
    $("servers").replaceChildren(...tools.servers.map((s) =>
      el(
        "tr",
        { "data-server": s.name, "data-state": s.state },
        el("td", { textContent: s.name }),
        el("td", { textContent: s.transport }),
        el("td", {}, el("span", { class: `state ${s.state}`, textContent: s.state })),
        el("td", { textContent: `${new Date(s.since).toLocaleTimeString()} (${ago(now - Date.parse(s.since))} ago)` }),
        el("td", { textContent: String(s.failures) }),
        el("td", { class: "error", textContent: s.lastError || "" })
      )
    ))
    if (tools.servers.length === 0) {
      $("servers").replaceChildren(
        el("tr", {}, el("td", { colSpan: 6, class: "muted", textContent: "No MCP servers configured." }))
      )
    }
  }

  const sessionLink = (s) => el("a", { href: `/ui/sessions/${encodeURIComponent(s.id)}`, textContent: s.id })

  const renderRunning = (page) => {
    const now = Date.now()
    $("running").replaceChildren(...page.sessions.map((s) =>
      el(
        "tr",
        { "data-session": s.id },
        el("td", {}, sessionLink(s)),
        el("td", { textContent: s.agentId }),
        el("td", { textContent: s.scope }),
        el("td", { textContent: String(s.modelCalls) }),
        el("td", { textContent: ago(now - s.updatedAt) })
      )
    ))
    if (page.sessions.length === 0) {
      $("running").replaceChildren(el("tr", {}, el("td", { colSpan: 5, class: "muted", textContent: "None running." })))
    }
  }

  // A write waits from the landing that asked for it: the session's last update while it awaits a decision.
  const renderApprovals = (page) => {
    const now = Date.now()
    const rows = page.sessions.flatMap((s) =>
      s.pending.map((p) =>
        el(
          "tr",
          { "data-call": p.callId },
          el("td", {}, sessionLink(s)),
          el("td", { textContent: p.tool }),
          el("td", { class: "call", textContent: p.arguments }),
          el("td", { textContent: ago(now - s.updatedAt) })
        )
      )
    )
    $("approvals-count").textContent = String(rows.length)
    $("approvals").replaceChildren(...rows)
    if (rows.length === 0) {
      $("approvals").replaceChildren(
        el("tr", {}, el("td", { colSpan: 4, class: "muted", textContent: "None waiting." }))
      )
    }
  }

  const listed = (status) => api("GET", `/v1/sessions?${new URLSearchParams({ status, limit: "100" })}`)

  const refresh = async () => {
    const errors = []
    const step = async (what, load, render) => {
      try {
        render(await load())
      } catch (error) {
        errors.push(`${what}: ${error.message}`)
      }
    }
    await Promise.all([
      step("metrics", async () => parseMetrics(await (await fetch("/metrics")).text()), renderMetrics),
      step("exits", () => api("GET", "/v1/exits"), renderExits),
      step("providers", () => api("GET", "/v1/providers"), renderProviders),
      step("tools", () => api("GET", "/v1/tools"), renderServers),
      step("running sessions", () => listed("running"), renderRunning),
      step("approvals", () => listed("awaiting_confirmation"), renderApprovals)
    ])
    $("error").textContent = errors.join("\n")
    $("conn").textContent = `updated ${new Date().toLocaleTimeString()}`
  }

  const keyInput = $("apikey")
  keyInput.value = apiKey()
  keyInput.addEventListener("change", () => {
    window.localStorage.setItem(KEY, keyInput.value.trim())
    refresh()
  })
  refresh()
  setInterval(refresh, REFRESH_MS)
})()

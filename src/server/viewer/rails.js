/*
 * Corral viewer — the rails of a session, drawn from its trajectories (GET /v1/sessions/{id}/trajectory), plain
 * browser JavaScript served as is.
 *
 * Gauges: how close the session is to each bound — model calls against the per-burst and per-session ceilings,
 * tool calls against the budget, tokens against the budget, active time against the deadline, strikes and repeats
 * against their thresholds. The bounds are the burst's effective limits (`replay.limits`), the numbers its budget
 * snapshots, tool calls, usage and rail decisions. A bar turns amber near its bound and red when it is the one that
 * ended the burst.
 *
 * Waterfall: one burst on one time axis — every model attempt on its provider's lane (its outcome or error kind),
 * the waits between them (a Retry-After or backoff, a storm-gate wait), failovers as arrows from one provider's lane
 * to the next, every tool call on its server's lane (duration, truncated, error), and the rail decisions as markers.
 *
 * Everything from the server is inserted as text or as SVG attributes, never as HTML. Exposes `window.CorralRails`.
 */
/* global document, window */
"use strict"
;(() => {
  const SVG = "http://www.w3.org/2000/svg"

  // viewer.js's DOM helper (it loads after this file; nothing here draws before it has).
  const el = (...args) => window.CorralViewer.el(...args)

  const svg = (tag, attributes, ...children) => {
    const node = document.createElementNS(SVG, tag)
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== undefined && value !== null) node.setAttribute(name, String(value))
    }
    for (const child of children) if (child !== undefined && child !== null) node.append(child)
    return node
  }

  const title = (text) => svg("title", {}, text)

  const ms = (n) =>
    n >= 10000 ? `${(n / 1000).toFixed(0)} s` : n >= 1000 ? `${(n / 1000).toFixed(1)} s` : `${Math.round(n)} ms`

  const tokensOf = (usage) => (usage ? usage.inputTokens + usage.outputTokens : 0)
  const unlimited = Number.MAX_SAFE_INTEGER
  const dollars = (micros) => `$${(micros / 1e6).toFixed(6)}`

  // ---- gauges ------------------------------------------------------------------------------------------------

  /** The exit reason each gauge can end a burst with. */
  const gaugeOfReason = {
    burst_limit: "model_calls_burst",
    session_limit: "model_calls_session",
    tool_budget: "tool_calls",
    token_budget: "tokens",
    cost_budget: "cost",
    deadline: "active_time",
    bad_tool_use: "strikes",
    repeat_call_halt: "repeats"
  }

  /** Tool calls that claimed a budget unit: the model's calls that were dispatched (a refused or surplus call was not). */
  const claimed = (t) => t.toolCalls.filter((c) => c.origin !== "handler" && c.status !== "not_executed").length

  /**
   * The numbers of each gauge for the latest burst `t` of a session (`view`: the session as it stands; its
   * counters are exact once the burst has landed). `now`: the client's clock, for a burst still running.
   */
  const measure = (t, view, now) => {
    const limits = t.replay && t.replay.limits
    if (!limits) return undefined
    const before = t.replay.before
    const last = t.budgets[t.budgets.length - 1]
    const decisions = t.decisions || []
    const landed = !t.open
    const latest = view && landed && view.bursts > 0
    const modelBurst = last ? last.modelCallsBurst : 0
    const modelSession = latest ? view.modelCalls : last ? last.modelCallsSession : before.modelCalls
    const toolCalls = latest ? view.toolCalls : before.toolCalls + claimed(t)
    const tokens = before.tokens + tokensOf(t.usage)
    // Money: integer micro-dollars; a bound of Number.MAX_SAFE_INTEGER is "no budget" (the gauge is left out).
    const costSession = latest && view.costMicros !== undefined
      ? view.costMicros
      : (before.costMicros || 0) + (t.costMicros || 0)
    const costBound = Math.min(limits.costPerBurst || unlimited, limits.costPerSession || unlimited)
    const costValue = limits.costPerBurst !== undefined && limits.costPerBurst < (limits.costPerSession || unlimited)
      ? t.costMicros || 0
      : costSession
    const activeMs = latest ? view.activeMs : before.activeMs + Math.max(0, (landed ? t.endedAt : now) - t.startedAt)
    // Strikes are consecutive: a tool call dispatched after the last strike belongs to a later, clean turn.
    const strikesDecided = decisions.filter((d) => d._tag === "strike")
    const lastStrike = strikesDecided[strikesDecided.length - 1]
    const strikes = lastStrike && !t.toolCalls.some((c) => c.startedAt !== undefined && c.startedAt > lastStrike.at)
      ? lastStrike.strikes
      : 0
    const repeats = decisions.filter((d) => d._tag === "repeat").reduce((max, d) => Math.max(max, d.count), 0)
    const exit = decisions.find((d) => d._tag === "exit")
    const ended = landed ? gaugeOfReason[t.exitReason] : undefined
    return {
      ended,
      exit,
      gauges: [
        { id: "model_calls_burst", label: "Model calls (burst)", value: modelBurst, bound: limits.modelCallsPerBurst },
        {
          id: "model_calls_session",
          label: "Model calls (session)",
          value: modelSession,
          bound: limits.modelCallsPerSession
        },
        { id: "tool_calls", label: "Tool calls", value: toolCalls, bound: limits.toolCalls },
        { id: "tokens", label: "Tokens", value: tokens, bound: limits.tokens },
        ...(costBound < unlimited
          ? [{ id: "cost", label: "Cost (µ$)", value: costValue, bound: costBound, money: true }]
          : []),
        { id: "active_time", label: "Active time", value: activeMs, bound: limits.activeTimeMs, time: true },
        { id: "strikes", label: "Bad-tool strikes", value: strikes, bound: limits.strikes },
        {
          id: "repeats",
          label: "Repeated calls",
          value: repeats,
          bound: limits.repeatHaltAt,
          warnAt: limits.repeatWarnAt
        }
      ]
    }
  }

  /** `hit`: the gauge that ended the burst; `near`: within a quarter (or one step) of its bound; `ok` otherwise. */
  const levelOf = (gauge, ended) => {
    if (gauge.id === ended) return "hit"
    if (gauge.value <= 0) return "ok"
    if (gauge.warnAt !== undefined && gauge.value >= gauge.warnAt) return "near"
    if (gauge.value / gauge.bound >= 0.75) return "near"
    if (!gauge.time && gauge.bound <= 4 && gauge.bound - gauge.value <= 1) return "near"
    return "ok"
  }

  /** Fills `container` with the gauges of the latest burst (`trajectories` oldest first). */
  const renderGauges = (container, trajectories, view, now) => {
    const t = trajectories[trajectories.length - 1]
    if (!t) {
      container.replaceChildren(el("p", { class: "muted", textContent: "No burst has run yet." }))
      return
    }
    const measured = measure(t, view, now)
    if (!measured) {
      container.replaceChildren(
        el("p", { class: "muted", textContent: "This burst's record is older than the limits it ran under." })
      )
      return
    }
    const rows = measured.gauges.map((g) => {
      const level = levelOf(g, measured.ended)
      const fill = el("div", { class: `fill ${level}` })
      // CSSOM, not a style attribute: the viewer's CSP allows no inline styles.
      fill.style.width = `${Math.min(100, (100 * g.value) / Math.max(1, g.bound))}%`
      const numbers = g.time ? `${ms(g.value)} / ${ms(g.bound)}` : g.money
        ? `${dollars(g.value)} / ${dollars(g.bound)}`
        : `${g.value} / ${g.bound}`
      // A meter for assistive technology (and a browser test): its value, its bound, and the same text as shown.
      const track = el("div", {
        class: "track",
        role: "meter",
        "aria-label": g.label,
        "aria-valuemin": "0",
        "aria-valuemax": String(g.bound),
        "aria-valuenow": String(Math.min(g.value, g.bound)),
        "aria-valuetext": numbers
      }, fill)
      if (g.warnAt !== undefined) {
        const tick = el("div", { class: "tick" })
        tick.style.left = `${Math.min(100, (100 * g.warnAt) / g.bound)}%`
        track.append(tick)
      }
      return el(
        "div",
        { class: `gauge ${level}`, "data-gauge": g.id, "data-level": level },
        el("span", { class: "label", textContent: g.label }),
        track,
        el("span", { class: "numbers", textContent: numbers + (level === "hit" ? " — ended the burst" : "") })
      )
    })
    const caption = t.open
      ? "burst running"
      : `burst ended: ${t.exitReason}${measured.exit ? ` — ${measured.exit.notice}` : ""}`
    container.replaceChildren(el("div", { class: "muted caption", textContent: caption }), ...rows)
  }

  // ---- waterfall ---------------------------------------------------------------------------------------------

  const laneOfTool = (
    call
  ) => (call.source.startsWith("mcp:") ? `mcp ${call.source.slice(4)}` : `tools (${call.source})`)

  /** The waterfall of burst `t` as an SVG element. `now`: the client's clock, for a burst still running. */
  const waterfall = (t, now) => {
    const decisions = t.decisions || []
    const start = t.startedAt
    let end = t.open ? Math.max(now, t.endedAt) : t.endedAt
    for (const a of t.modelCalls) end = Math.max(end, a.startedAt + a.durationMs)
    for (const c of t.toolCalls) if (c.startedAt !== undefined) end = Math.max(end, c.startedAt + c.durationMs)
    for (const d of decisions) {
      end = Math.max(end, d.at + (d._tag === "retry" ? d.delayMs : 0))
    }
    const span = Math.max(1, end - start)

    // Lanes: the route's providers in order (those of the record first), then each tool server.
    const providers = []
    const addProvider = (name) => {
      if (name && !providers.includes(name)) providers.push(name)
    }
    for (const r of (t.replay && t.replay.route) || []) addProvider(r.name)
    for (const a of t.modelCalls) addProvider(a.provider)
    const used = new Set(t.modelCalls.map((a) => a.provider))
    for (const d of decisions) {
      if (d._tag === "failover") {
        used.add(d.from)
        if (d.to) used.add(d.to)
      }
    }
    const modelLanes = providers.filter((p) => used.has(p))
    const toolLanes = []
    for (const c of t.toolCalls) {
      if (c.startedAt === undefined) continue
      const lane = laneOfTool(c)
      if (!toolLanes.includes(lane)) toolLanes.push(lane)
    }
    const lanes = [...modelLanes.map((p) => `model ${p}`), ...toolLanes]

    const labelW = 150
    const width = 900
    const plotW = width - labelW - 10
    // Room above the lanes for four rows of decision labels.
    const labelRows = 4
    const top = 16 + labelRows * 10
    const laneH = 26
    const height = top + Math.max(1, lanes.length) * laneH + 22
    const x = (at) => labelW + (plotW * (at - start)) / span
    const w = (d) => Math.max(2, (plotW * d) / span)
    const laneY = (name) => top + lanes.indexOf(name) * laneH
    const modelY = (provider) => laneY(`model ${provider}`)

    const root = svg("svg", {
      class: "waterfall",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": `waterfall of burst ${t.runId}`
    })
    root.append(svg(
      "defs",
      {},
      svg(
        "marker",
        {
          id: `arrow-${t.runId}`,
          viewBox: "0 0 10 10",
          refX: 9,
          refY: 5,
          markerWidth: 7,
          markerHeight: 7,
          orient: "auto"
        },
        svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" })
      ),
      svg(
        "pattern",
        { id: `hatch-${t.runId}`, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
        svg("rect", { width: 6, height: 6, class: "hatch-bg" }),
        svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "hatch-line" })
      )
    ))

    // Lanes and the time axis.
    lanes.forEach((name, i) => {
      const y = top + i * laneH
      root.append(svg("rect", { x: 0, y, width, height: laneH, class: i % 2 === 0 ? "lane even" : "lane odd" }))
      root.append(svg("text", { x: 6, y: y + 17, class: "lane-label" }, name))
    })
    const step = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000].find((s) => span / s <= 8) || 60000
    for (let at = 0; at <= span; at += step) {
      root.append(svg("line", { x1: x(start + at), x2: x(start + at), y1: top - 4, y2: height - 20, class: "tick" }))
      root.append(svg("text", { x: x(start + at) + 2, y: height - 6, class: "axis" }, `+${ms(at)}`))
    }

    // Waits first (under the attempts): Retry-After / backoff and storm-gate waits, on the provider's lane.
    for (const d of decisions) {
      if (d._tag === "retry" && modelLanes.includes(d.provider)) {
        const why = d.retryAfterMs === undefined ? "backoff" : `Retry-After ${ms(d.retryAfterMs)}`
        root.append(svg(
          "rect",
          {
            x: x(d.at),
            y: modelY(d.provider) + 5,
            width: w(d.delayMs),
            height: laneH - 10,
            fill: `url(#hatch-${t.runId})`,
            class: "wait retry",
            "data-wait": "retry",
            "data-provider": d.provider
          },
          title(`${d.provider}: ${d.kind} on attempt ${d.attempt}, waits ${ms(d.delayMs)} (${why})`)
        ))
        root.append(
          svg(
            "text",
            { x: x(d.at) + 3, y: modelY(d.provider) + laneH - 2, class: "wait-label" },
            `wait ${ms(d.delayMs)}`
          )
        )
      } else if (d._tag === "storm_wait" && modelLanes.includes(d.provider)) {
        // Stamped at its release: the wait ran from `at - waitMs` to `at`.
        root.append(svg(
          "rect",
          {
            x: x(d.at - d.waitMs),
            y: modelY(d.provider) + 5,
            width: w(d.waitMs),
            height: laneH - 10,
            class: "wait gate",
            "data-wait": "storm_wait",
            "data-provider": d.provider
          },
          title(`${d.provider}: waited ${ms(d.waitMs)} at the storm gate before the attempt was sent`)
        ))
      }
    }

    // Model attempts.
    for (const a of t.modelCalls) {
      const outcome = a.error ? a.error.kind : "ok"
      const detail = a.error
        ? `${a.error.kind}${a.error.status ? ` ${a.error.status}` : ""}${
          a.error.retryAfterMs === undefined ? "" : `, Retry-After ${ms(a.error.retryAfterMs)}`
        }: ${a.error.message.slice(0, 160)}`
        : `reply (${a.reply ? a.reply.finishReason : "ok"}), ${tokensOf(a.usage)} tokens`
      const bx = x(a.startedAt)
      root.append(svg(
        "rect",
        {
          x: bx,
          y: modelY(a.provider) + 4,
          width: w(a.durationMs),
          height: laneH - 8,
          rx: 2,
          class: `attempt ${a.error ? "error" : "ok"}`,
          "data-attempt": a.attempt,
          "data-provider": a.provider,
          "data-outcome": outcome
        },
        title(`${a.provider} attempt ${a.attempt}: ${ms(a.durationMs)} — ${detail}`)
      ))
      if (a.error) {
        root.append(
          svg(
            "text",
            { x: bx + w(a.durationMs) + 2, y: modelY(a.provider) + 11, class: "outcome" },
            a.error.status ? `${a.error.kind} ${a.error.status}` : a.error.kind
          )
        )
      }
    }

    // Failovers: an arrow from the failed provider's lane to the next provider's first attempt after it.
    for (const d of decisions) {
      if (d._tag !== "failover" || !modelLanes.includes(d.from)) continue
      const y1 = modelY(d.from) + laneH / 2
      if (d.to && modelLanes.includes(d.to)) {
        const next = t.modelCalls.find((a) => a.provider === d.to && a.startedAt >= d.at)
        const x2 = next ? x(next.startedAt) : x(d.at) + 12
        root.append(svg(
          "line",
          {
            x1: x(d.at),
            y1,
            x2: Math.max(x2, x(d.at) + 8),
            y2: modelY(d.to) + laneH / 2,
            class: "failover",
            "marker-end": `url(#arrow-${t.runId})`,
            "data-from": d.from,
            "data-to": d.to
          },
          title(
            `failover ${d.from} → ${d.to} (${d.kind}${
              d.retryAfterMs === undefined ? "" : `: Retry-After ${ms(d.retryAfterMs)} is beyond the cap`
            })`
          )
        ))
      } else {
        root.append(svg(
          "text",
          { x: x(d.at) + 3, y: y1 + 4, class: "failover spent", "data-from": d.from },
          `✕ route spent (${d.kind})`
        ))
      }
    }

    // Tool calls.
    const truncated = new Set(decisions.filter((d) => d._tag === "truncate").map((d) => d.callId))
    for (const c of t.toolCalls) {
      if (c.startedAt === undefined) continue
      const lane = laneOfTool(c)
      const state = c.isError || c.status === "error" ? "error" : c.status
      root.append(svg(
        "rect",
        {
          x: x(c.startedAt),
          y: laneY(lane) + 4,
          width: w(c.durationMs),
          height: laneH - 8,
          rx: 2,
          class: `tool ${state}${truncated.has(c.callId) ? " truncated" : ""}`,
          "data-tool": c.name,
          "data-status": c.status,
          "data-truncated": truncated.has(c.callId) ? "true" : "false"
        },
        title(
          `${c.name} (${c.source}): ${c.status}${c.failure ? ` ${c.failure}` : ""}, ${ms(c.durationMs)}${
            truncated.has(c.callId) ? ", truncated" : ""
          }`
        )
      ))
      // A label only where it fits before the lane's next call (the tooltip always has it).
      const text = `${c.name}${c.status === "ok" ? "" : ` ${c.failure || c.status}`}${
        truncated.has(c.callId) ? " ✂" : ""
      }`
      const after = x(c.startedAt) + w(c.durationMs) + 2
      const next = t.toolCalls.find((o) =>
        o !== c && o.startedAt !== undefined && laneOfTool(o) === lane && o.startedAt >= c.startedAt &&
        x(o.startedAt) > x(c.startedAt)
      )
      const room = (next ? x(next.startedAt) : width) - after
      if (room > text.length * 6) {
        root.append(svg("text", { x: after, y: laneY(lane) + 17, class: "outcome" }, text))
      }
    }

    // Rail decisions as markers across every lane.
    const markers = {
      nudge: (d) => `nudge (${d.cause})`,
      prune: (d) => (d.pruned ? "prune" : "prune (nothing to prune)"),
      repeat: (d) => `repeat ${d.verdict} ×${d.count} ${d.tool}`,
      strike: (d) => `strike ${d.strikes}`,
      turn_cap: (d) => `turn cap: ${d.surplus} not run`,
      budget_refused: (d) => `budget refused ${d.tool}`,
      confirmation: (d) => `awaits approval: ${d.tool}`,
      exit: (d) => `exit: ${d.reason}`
    }
    // Each label goes in the first row where it overlaps no other; right of its line, or left of it near the end.
    const rows = Array.from({ length: labelRows }, () => [])
    const fits = (row, from, to) => row.every(([a, b]) => to < a || from > b)
    for (const d of decisions) {
      const label = markers[d._tag]
      if (!label) continue
      const mx = x(d.at)
      const text = label(d)
      const textW = text.length * 5.5
      const leftward = mx + 2 + textW > width
      const from = leftward ? mx - 2 - textW : mx + 2
      const to = from + textW
      const free = rows.findIndex((row) => fits(row, from, to))
      const r = free === -1 ? labelRows - 1 : free
      rows[r].push([from, to])
      root.append(svg(
        "line",
        { x1: mx, x2: mx, y1: 14 + r * 10, y2: height - 20, class: `marker ${d._tag}`, "data-marker": d._tag },
        title(d._tag === "exit" ? `${d.reason} (${d.check}): ${d.notice}` : text)
      ))
      root.append(svg(
        "text",
        {
          x: leftward ? mx - 2 : mx + 2,
          y: 12 + r * 10,
          "text-anchor": leftward ? "end" : "start",
          class: `marker-label ${d._tag}`
        },
        text
      ))
    }
    return root
  }

  /** Fills `container` with one waterfall per burst, the latest first and open. */
  const renderWaterfalls = (container, trajectories, now) => {
    if (trajectories.length === 0) {
      container.replaceChildren(el("p", { class: "muted", textContent: "No burst has run yet." }))
      return
    }
    const open = new Set(
      [...container.querySelectorAll("details[open]")].map((d) => d.getAttribute("data-run"))
    )
    const items = trajectories.slice().reverse().map((t, i) => {
      const when = new Date(t.startedAt).toLocaleTimeString()
      const summary = el(
        "summary",
        {},
        `Burst ${trajectories.length - i} · ${when} · ${t.open ? "running" : t.exitReason} · ` +
          `${t.modelCalls.length} attempts, ${t.toolCalls.length} tool calls, ${
            ms((t.open ? now : t.endedAt) - t.startedAt)
          }`
      )
      const details = el("details", { class: "burst", "data-run": t.runId }, summary, waterfall(t, now))
      if (i === 0 || open.has(t.runId)) details.open = true
      return details
    })
    container.replaceChildren(...items)
  }

  window.CorralRails = { measure, levelOf, renderGauges, renderWaterfalls }
})()

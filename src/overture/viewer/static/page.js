"use strict";
// overture viewer: draws the trajectory list and one trajectory from the run's JSON.
// Every text from the run goes into the page through textContent (never innerHTML), so model
// output, tool output, statements and diffs show as text. State lives in the URL hash
// (#task=..&step=..&status=..&reward=..&trajectory=..&view=..), so a view can be linked.
(function () {
  const data = JSON.parse(document.getElementById("run-data").textContent);
  const trajectories = data.trajectories;
  const byId = new Map(trajectories.map((t) => [t.id, t]));
  const STATUS_ORDER = ["finished", "truncated", "aborted", "failed"];
  const FILTERS = ["task", "step", "status", "reward"];
  const PALETTE = [
    ["#dbeafe", "#1d4ed8"], ["#fef3c7", "#b45309"], ["#dcfce7", "#15803d"], ["#fce7f3", "#be185d"],
    ["#ede9fe", "#6d28d9"], ["#ffedd5", "#c2410c"], ["#ccfbf1", "#0f766e"], ["#fee2e2", "#b91c1c"],
  ];
  const HEADLINE_METRICS = [
    ["turns", "turns"], ["tool_calls", "tool calls"], ["tool_calls_per_turn", "calls / turn"],
    ["parallel_turn_share", "parallel turns"], ["reads_before_first_edit", "reads before edit"],
    ["invalid_calls", "invalid calls"], ["tool_errors", "tool errors"], ["policy_tokens", "policy tokens"],
    ["tokens", "tokens"], ["elapsed_s", "seconds"],
  ];
  let state = readHash();

  // ------------------------------------------------------------------ small DOM helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function add(parent, ...children) {
    for (const child of children) if (child) parent.appendChild(child);
    return parent;
  }

  function versionColors(version) {
    if (typeof version !== "number" || version < 0) return ["#f1f5f9", "#64748b"];
    return PALETTE[version % PALETTE.length];
  }

  function versionChip(version, label) {
    const chip = el("span", "version-chip", label || (version === null ? "v?" : "v" + version));
    const [background, border] = versionColors(version);
    chip.style.background = background;
    chip.style.borderColor = border;
    chip.style.color = border;
    return chip;
  }

  function formatNumber(value) {
    if (typeof value !== "number") return String(value);
    if (Number.isInteger(value)) return String(value);
    return Math.abs(value) >= 100 ? value.toFixed(0) : value.toPrecision(3).replace(/\.?0+$/, "");
  }

  function formatValue(value) {
    if (value === null || value === undefined) return "–";
    if (typeof value === "number") return formatNumber(value);
    if (typeof value === "string") return value || "–";
    if (Array.isArray(value) && value.every((v) => typeof v !== "object")) return value.join(", ") || "none";
    return JSON.stringify(value);
  }

  function plural(count, noun) {
    return count + " " + noun + (count === 1 ? "" : "s");
  }

  function statusPill(status) {
    return el("span", "status status-" + (STATUS_ORDER.includes(status) ? status : "other"), status);
  }

  function rewardClass(reward) {
    return reward > 0 ? "reward positive" : reward < 0 ? "reward negative" : "reward zero";
  }

  // ------------------------------------------------------------------ state in the URL hash

  function readHash() {
    const params = new URLSearchParams(window.location.hash.slice(1));
    const read = {};
    for (const key of [...FILTERS, "trajectory", "view"]) read[key] = params.get(key) || "";
    if (read.view !== "charts") read.view = "trajectories";
    return read;
  }

  function writeHash() {
    const params = new URLSearchParams();
    for (const key of [...FILTERS, "trajectory"]) if (state[key]) params.set(key, state[key]);
    if (state.view === "charts") params.set("view", "charts");
    const hash = params.toString();
    try {
      history.replaceState(null, "", hash ? "#" + hash : window.location.pathname + window.location.search);
    } catch (error) {
      // Some browsers refuse replaceState on file:// pages; the state then just is not linkable.
    }
  }

  // ------------------------------------------------------------------ filters and list

  function fillSelect(select, options) {
    for (const [value, label] of options) {
      const option = el("option", null, label);
      option.value = value;
      select.appendChild(option);
    }
  }

  function setUpFilters() {
    const tasks = [...new Set(trajectories.map((t) => t.task_id))].sort();
    fillSelect(document.getElementById("filter-task"), tasks.map((task) => [task, task]));
    const withTrajectories = new Set(trajectories.map((t) => t.source));
    const steps = data.sources.filter((s) => withTrajectories.has(s.name)).map((s) => [s.name, s.label]);
    fillSelect(document.getElementById("filter-step"), steps);
    const statuses = [...new Set(trajectories.map((t) => t.status))].sort(
      (a, b) => STATUS_ORDER.indexOf(a) - STATUS_ORDER.indexOf(b));
    fillSelect(document.getElementById("filter-status"), statuses.map((s) => [s, s]));
    for (const key of FILTERS) {
      const select = document.getElementById("filter-" + key);
      select.addEventListener("change", () => {
        state[key] = select.value;
        writeHash();
        renderList(true);
      });
    }
  }

  function matches(t) {
    if (state.task && t.task_id !== state.task) return false;
    if (state.step && t.source !== state.step) return false;
    if (state.status && t.status !== state.status) return false;
    if (state.reward === "positive" && !(t.reward > 0)) return false;
    if (state.reward === "zero" && t.reward !== 0) return false;
    if (state.reward === "negative" && !(t.reward < 0)) return false;
    return true;
  }

  function listItem(t) {
    const item = el("li", "list-item");
    item.dataset.id = t.id;
    item.tabIndex = 0;
    const top = add(el("div", "item-top"), el("span", "item-task", t.task_id),
      el("span", rewardClass(t.reward), formatNumber(t.reward)));
    const calls = t.turns.reduce((sum, turn) => sum + turn.calls.length, 0);
    const bottom = add(el("div", "item-bottom"), el("span", "item-source", t.source_label), statusPill(t.status),
      el("span", "item-count", plural(t.turns.length, "turn") + " · " + plural(calls, "call")));
    const versions = el("span", "item-versions");
    for (const [version] of t.version_tokens) versions.appendChild(versionChip(version));
    bottom.appendChild(versions);
    add(item, top, bottom);
    item.addEventListener("click", () => select(t.id));
    item.addEventListener("keydown", (event) => {
      if (event.key === "Enter") select(t.id);
    });
    return item;
  }

  function renderList(pickFirst) {
    for (const key of FILTERS) document.getElementById("filter-" + key).value = state[key];
    const list = document.getElementById("trajectory-list");
    list.replaceChildren();
    const shown = trajectories.filter(matches);
    for (const t of shown) list.appendChild(listItem(t));
    document.getElementById("list-count").textContent =
      shown.length + " of " + trajectories.length + " trajectories";
    if (pickFirst && !shown.some((t) => t.id === state.trajectory)) {
      state.trajectory = shown.length ? shown[0].id : "";
      writeHash();
    }
    renderSelected();
  }

  function select(id) {
    state.trajectory = id;
    writeHash();
    renderSelected();
  }

  function renderSelected() {
    for (const item of document.querySelectorAll(".list-item")) {
      item.classList.toggle("selected", item.dataset.id === state.trajectory);
    }
    const t = byId.get(state.trajectory);
    const pane = document.getElementById("trajectory");
    pane.replaceChildren(t ? renderTrajectory(t) : el("p", "placeholder", "No trajectory matches the filters."));
    pane.scrollTop = 0;
  }

  // ------------------------------------------------------------------ one trajectory

  function section(title, className) {
    const box = el("section", "block " + (className || ""));
    box.appendChild(el("h3", null, title));
    return box;
  }

  function collapsible(title, body, open) {
    const details = el("details", "block collapsible");
    details.open = Boolean(open);
    add(details, el("summary", null, title), body);
    return details;
  }

  function renderHeader(t) {
    const head = el("header", "trajectory-head");
    const titles = add(el("div", "titles"), el("h2", "trajectory-title", t.task_id),
      el("div", "trajectory-sub", [t.source_label, t.group_id, t.id].filter(Boolean).join(" · ")));
    const verdict = add(el("div", "verdict"), statusPill(t.status),
      t.status_reason ? el("span", "status-reason", t.status_reason) : null,
      add(el("div", "reward-box"), el("span", "reward-label", "reward"),
        el("span", rewardClass(t.reward) + " big", formatNumber(t.reward))));
    return add(head, titles, verdict);
  }

  function renderGrade(t) {
    const box = section("Grade", "grade");
    const table = el("dl", "facts-grid");
    for (const [key, value] of Object.entries(t.reward_info)) {
      const shown = formatValue(value);
      const fact = el("div", shown.length > 36 ? "fact wide" : "fact");
      add(table, add(fact, el("dt", null, key.replaceAll("_", " ")), el("dd", null, shown)));
    }
    if (!table.childElementCount) table.appendChild(el("p", "muted", "not graded"));
    return add(box, table);
  }

  function renderMetrics(t) {
    const box = section("Behaviour", "metrics");
    const row = el("dl", "facts-grid");
    for (const [key, label] of HEADLINE_METRICS) {
      if (!(key in t.metrics)) continue;
      const value = t.metrics[key];
      const shown = key.endsWith("_share") ? Math.round(value * 100) + "%" : formatValue(value);
      add(row, add(el("div", "fact"), el("dt", null, label), el("dd", null, shown)));
    }
    add(box, row);
    const legend = el("div", "legend");
    legend.appendChild(el("span", "legend-title", "policy versions"));
    for (const [version, count] of t.version_tokens) {
      legend.appendChild(versionChip(version, "v" + version + " · " + count + " tokens"));
    }
    if (!t.version_tokens.length) legend.appendChild(el("span", "muted", "no policy tokens"));
    if (t.lag !== null) legend.appendChild(el("span", "lag", "staleness " + t.lag));
    return add(box, legend);
  }

  function renderSegments(turn) {
    const body = el("pre", "tokens");
    turn.segments.forEach(([version, text], position) => {
      if (position > 0) body.appendChild(versionChip(version, "→ v" + version));
      const span = el("span", "segment", text);
      span.style.background = versionColors(version)[0];
      span.title = version === null ? "recorded text (tokens not decoded)" : "policy version " + version;
      body.appendChild(span);
    });
    if (!turn.segments.length) body.appendChild(el("span", "muted", "(no tokens)"));
    return body;
  }

  function renderArgument(name, value) {
    const row = el("div", "argument");
    row.appendChild(el("div", "argument-name", name));
    const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    const long = (typeof value === "object" && value !== null) || text.includes("\n") || text.length > 70;
    row.appendChild(el(long ? "pre" : "code", "argument-value", text));
    return row;
  }

  function renderCall(call) {
    const card = el("div", "call" + (call.error ? " call-error" : ""));
    const head = add(el("div", "call-head"), el("span", "call-name", call.name || "(unparsed call)"),
      el("span", "call-index", "#" + call.index));
    if (call.error) head.appendChild(el("span", "badge badge-error", call.error === "tool" ? "tool error" : call.error));
    if (call.truncated) head.appendChild(el("span", "badge", "response cut"));
    if (typeof call.duration_s === "number") head.appendChild(el("span", "call-time", call.duration_s.toFixed(2) + " s"));
    card.appendChild(head);
    const args = el("div", "arguments");
    if (call.arguments && typeof call.arguments === "object") {
      for (const [name, value] of Object.entries(call.arguments)) args.appendChild(renderArgument(name, value));
      if (!args.childElementCount) args.appendChild(el("div", "muted", "no arguments"));
    } else {
      args.appendChild(el("div", "muted", "arguments could not be parsed"));
    }
    card.appendChild(args);
    const response = String(call.response ?? "");
    const lines = response ? response.split("\n").length : 0;
    const details = el("details", "response");
    add(details, el("summary", null, "response · " + lines + (lines === 1 ? " line" : " lines")),
      el("pre", "response-text", response));
    card.appendChild(details);
    return card;
  }

  function renderTurn(turn) {
    const box = el("section", "turn");
    const versions = [...new Set(turn.segments.map(([version]) => version))];
    const head = add(el("div", "turn-head"), el("span", "turn-title", "Turn " + (turn.index + 1)),
      turn.finish_reason ? el("span", "turn-meta", "stop: " + turn.finish_reason) : null,
      el("span", "turn-meta", "generation " + Number(turn.generation_s).toFixed(2) + " s"),
      turn.calls.length ? el("span", "turn-meta", "tools " + Number(turn.tool_wall_s).toFixed(2) + " s") : null);
    const chips = el("span", "turn-versions");
    for (const version of versions) chips.appendChild(versionChip(version));
    head.appendChild(chips);
    add(box, head, renderSegments(turn));
    if (turn.calls.length) {
      const label = turn.calls.length > 1 ? turn.calls.length + " calls, run in parallel" : "1 call";
      const calls = el("div", "calls" + (turn.calls.length > 1 ? " parallel" : ""));
      for (const call of turn.calls) calls.appendChild(renderCall(call));
      add(box, el("div", "calls-label", label), calls);
      if (!turn.responses_appended) {
        box.appendChild(el("div", "muted note", "responses were not appended to the conversation"));
      }
    }
    return box;
  }

  function renderDiff(changes) {
    const title = changes.origin === "recorded" ? "Final diff" : "Edits (from the agent's edit calls)";
    const box = section(title, "changes");
    if (!changes.diff) return add(box, el("p", "muted", "no changes"));
    const pre = el("pre", "diff");
    for (const line of changes.diff.replace(/\n$/, "").split("\n")) {
      let kind = "context";
      if (line.startsWith("+++") || line.startsWith("---")) kind = "file";
      else if (line.startsWith("@@")) kind = "hunk";
      else if (line.startsWith("+")) kind = "added";
      else if (line.startsWith("-")) kind = "removed";
      pre.appendChild(el("span", "diff-line diff-" + kind, line + "\n"));
    }
    return add(box, pre);
  }

  function renderTrajectory(t) {
    const view = el("div", "trajectory-view");
    view.dataset.id = t.id;
    add(view, renderHeader(t), add(el("div", "summary-row"), renderGrade(t), renderMetrics(t)),
      collapsible("Task statement", el("pre", "prose", t.statement), true),
      collapsible("System prompt", el("pre", "prose", data.systems[t.system] || ""), false));
    const turns = section(plural(t.turns.length, "turn"), "turns");
    for (const turn of t.turns) turns.appendChild(renderTurn(turn));
    add(view, turns, renderDiff(t.changes));
    return view;
  }

  // ------------------------------------------------------------------ views and keys

  function showView() {
    for (const name of ["trajectories", "charts"]) {
      document.getElementById("view-" + name).hidden = state.view !== name;
    }
    for (const tab of document.querySelectorAll(".tab")) {
      tab.classList.toggle("active", tab.dataset.view === state.view);
    }
  }

  function moveSelection(offset) {
    const items = [...document.querySelectorAll(".list-item")];
    const at = items.findIndex((item) => item.dataset.id === state.trajectory);
    const next = items[Math.min(items.length - 1, Math.max(0, at + offset))];
    if (next) {
      select(next.dataset.id);
      next.scrollIntoView({ block: "nearest" });
    }
  }

  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      state.view = tab.dataset.view;
      writeHash();
      showView();
    });
  }
  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLSelectElement || state.view !== "trajectories") return;
    if (event.key === "j") moveSelection(1);
    if (event.key === "k") moveSelection(-1);
  });
  window.addEventListener("hashchange", () => {
    state = readHash();
    showView();
    renderList(true);
  });

  setUpFilters();
  showView();
  renderList(true);
  document.body.dataset.rendered = String(trajectories.length);
})();

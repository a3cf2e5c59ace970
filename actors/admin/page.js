// The status page: reads /events (server-sent events, through fetch so it can send the bearer token) and
// draws the tree, each backend's state and history, and its calls/s and p50/p99 charts, each with a scale
// (0, half and top, a round number with its unit) and a time axis (the last two minutes, one sample a
// second). No library, no build step. Every text from the gateway goes in through textContent, never as HTML.
"use strict";

const TOKEN_KEY = "mcp-gateway-admin-token";
const SERIES_LENGTH = 120;
const SAMPLE_S = 1; // the gateway's rate sampler: one sample a second
const RETRY_MS = 2000;
const series = new Map(); // backend -> [[at, calls/s, p50 ms, p99 ms], ...]

function takeToken() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) {
    sessionStorage.setItem(TOKEN_KEY, fromHash);
    history.replaceState(null, "", location.pathname); // the token leaves the address bar
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.floor(seconds);
  const parts = [[Math.floor(s / 86400), "d"], [Math.floor(s / 3600) % 24, "h"], [Math.floor(s / 60) % 60, "m"], [s % 60, "s"]];
  const shown = parts.filter(([n], i) => n > 0 || i === 3).slice(0, 2);
  return shown.map(([n, unit]) => n + unit).join(" ");
}

function clock(at) {
  return new Date(at * 1000).toLocaleTimeString();
}

function setLive(state, text) {
  const badge = document.getElementById("live");
  badge.dataset.live = state;
  badge.textContent = text;
}

function renderHeader(gateway) {
  document.getElementById("gateway-name").textContent = gateway.name;
  document.title = gateway.name + " status";
  const ready = document.getElementById("ready");
  ready.dataset.ready = String(gateway.ready);
  ready.textContent = gateway.ready ? "ready" : gateway.settled ? "not ready" : "starting";
  document.getElementById("gateway-facts").textContent =
    `version ${gateway.version} · pid ${gateway.pid} · up ${duration(gateway.uptime_s)} · ${gateway.config}`;
}

function renderTree(status) {
  const root = el("li", `gateway ${status.gateway.name}`);
  const branches = el("ul");
  const frontends = el("li", "frontends supervisor");
  const frontendList = el("ul");
  for (const frontend of status.frontends) {
    const item = el("li", `${frontend.name}${frontend.url ? " " + frontend.url : ""}: ${frontend.session_count} session(s)`);
    if (frontend.sessions.length) {
      const sessions = el("ul");
      for (const id of frontend.sessions) sessions.append(el("li", `session ${id}`));
      item.append(sessions);
    }
    frontendList.append(item);
  }
  frontends.append(frontendList);
  const backends = el("li", "backends supervisor");
  const backendList = el("ul");
  for (const backend of status.backends) {
    const item = el("li", `${backend.name}: `);
    const state = el("span", backend.state, "badge");
    state.dataset.state = backend.state;
    item.append(state);
    item.dataset.backend = backend.name;
    backendList.append(item);
  }
  backends.append(backendList);
  branches.append(frontends, backends);
  root.append(branches);
  document.getElementById("tree").replaceChildren(root);
}

function card(name) {
  let article = document.querySelector(`article[data-backend="${CSS.escape(name)}"]`);
  if (!article) {
    article = document.getElementById("backend-template").content.firstElementChild.cloneNode(true);
    article.dataset.backend = name;
    article.querySelector(".name").textContent = name;
    document.getElementById("backends").append(article);
  }
  return article;
}

function sandboxFact(sandbox) {
  // "require · bwrap,landlock,rlimits" and what this kernel cannot enforce; "–" for none (off or remote)
  if (!sandbox) return "–";
  if (!sandbox.engines) return sandbox.mode;
  const missing = sandbox.missing.length ? ` · missing ${sandbox.missing.join(",")}` : "";
  return `${sandbox.mode} · ${sandbox.engines.join(",")}${missing}`;
}

function renderBackend(backend) {
  const article = card(backend.name);
  article.dataset.state = backend.state;
  const state = article.querySelector(".state");
  state.dataset.state = backend.state;
  state.textContent = backend.state + (backend.required ? " · required" : "");
  const facts = [
    ["pid", backend.pid ?? "–"], ["eras", backend.eras ?? "–"], ["uptime", duration(backend.uptime_s)],
    ["restarts", backend.restarts], ["tools", backend.tools],
    ["in flight", backend.inflight + (backend.listening ? " · listening" : "")], ["calls", backend.calls],
    ["trust", backend.trust.mode + (backend.trust.hidden ? ` · ${backend.trust.hidden} held` : "")],
    ["sandbox", sandboxFact(backend.sandbox)],
  ];
  article.querySelector(".facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", k), el("dd", v)]));
  const error = backend.reason || (backend.last_error ? `last error (${clock(backend.last_error.at)}): ${backend.last_error.reason}` : "");
  article.querySelector(".error").textContent = error;
  const history = backend.history.slice().reverse().map(
    (change) => el("li", `${clock(change.at)} ${change.state}${change.reason ? ": " + change.reason : ""}`),
  );
  article.querySelector(".history").replaceChildren(...history);
  drawCharts(article, series.get(backend.name) || []);
}

function points(values, max) {
  // newest at the right edge; one step per sample of the last SERIES_LENGTH; the top grid line is max
  const step = 240 / (SERIES_LENGTH - 1);
  return values
    .map((v, i) => (v === null ? null : `${240 - (values.length - 1 - i) * step},${46 - (v / max) * 44}`))
    .filter((p) => p !== null)
    .join(" ");
}

function niceMax(value) {
  // the smallest of 1, 2, 5 x 10^k at or above value: a scale a person reads at a glance
  const top = Math.max(value, 1e-9);
  const power = 10 ** Math.floor(Math.log10(top));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= top * (1 - 1e-9));
}

function number(v) {
  return v >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v >= 1 ? v.toFixed(1) : String(+v.toPrecision(2));
}

function ms(v) {
  return v === null || v === undefined ? "–" : v < 10 ? v.toFixed(1) + " ms" : Math.round(v) + " ms";
}

function axes(figure, max, unit) {
  figure.querySelector(".y-max").textContent = `${number(max)} ${unit}`;
  figure.querySelector(".y-mid").textContent = `${number(max / 2)} ${unit}`;
  figure.querySelector(".y-min").textContent = `0 ${unit}`;
  const span = SERIES_LENGTH * SAMPLE_S;
  figure.querySelector(".x-start").textContent = `−${span / 60} min`;
  figure.querySelector(".x-mid").textContent = `−${span / 120} min`;
  figure.querySelector(".x-end").textContent = "now";
}

function drawCharts(article, samples) {
  const rates = samples.map((s) => s[1]);
  const p50 = samples.map((s) => s[2]);
  const p99 = samples.map((s) => s[3]);
  const rateMax = niceMax(Math.max(1, ...rates));
  const latencyMax = niceMax(Math.max(1, ...p99.filter((v) => v !== null)));
  article.querySelector(".area").setAttribute("points", points(rates, rateMax));
  article.querySelector(".p50").setAttribute("points", points(p50, latencyMax));
  article.querySelector(".p99").setAttribute("points", points(p99, latencyMax));
  axes(article.querySelector("figure.rate"), rateMax, "calls/s");
  axes(article.querySelector("figure.latency"), latencyMax, "ms");
  const last = samples[samples.length - 1];
  article.querySelector(".rate-now").textContent = last ? last[1].toFixed(1) : "–";
  article.querySelector(".p50-now").textContent = last ? ms(last[2]) : "–";
  article.querySelector(".p99-now").textContent = last ? ms(last[3]) : "–";
}

function takeSamples(samples) {
  for (const [name, fresh] of Object.entries(samples)) {
    const kept = series.get(name) || [];
    for (const sample of fresh) {
      if (!kept.length || sample[0] > kept[kept.length - 1][0]) kept.push(sample);
    }
    series.set(name, kept.slice(-SERIES_LENGTH));
  }
}

function renderTrust(trust) {
  const held = trust.held.map((entry) => {
    const state = entry.rejected ? "rejected" : entry.hidden ? "hidden" : "not listed now";
    const item = el("li", `${entry.kind} ${entry.id}: ${entry.reason}, ${state} (digest ${entry.digest})`);
    item.dataset.held = entry.id;
    return item;
  });
  document.getElementById("held").replaceChildren(...held);
  document.getElementById("trust").hidden = held.length === 0;
}

function render(snapshot) {
  takeSamples(snapshot.samples);
  renderHeader(snapshot.status.gateway);
  renderTree(snapshot.status);
  renderTrust(snapshot.status.trust);
  const names = new Set(snapshot.status.backends.map((b) => b.name));
  for (const article of document.querySelectorAll("article[data-backend]")) {
    if (!names.has(article.dataset.backend)) article.remove();
  }
  snapshot.status.backends.forEach(renderBackend);
}

function askToken() {
  setLive("down", "token needed");
  const form = document.getElementById("token-form");
  form.hidden = false;
  form.onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value);
    form.hidden = true;
    connect();
  };
}

function retry(why) {
  setLive("down", `disconnected (${why}); retrying`);
  setTimeout(connect, RETRY_MS);
}

async function connect() {
  const token = takeToken();
  const headers = token ? { Authorization: "Bearer " + token } : {};
  let response;
  try {
    response = await fetch("/events", { headers, cache: "no-store" });
  } catch (error) {
    return retry("unreachable");
  }
  if (response.status === 401) return askToken();
  if (!response.ok) return retry("HTTP " + response.status);
  setLive("live", "live");
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n");
        if (data) render(JSON.parse(data));
      }
    }
  } catch (error) {
    return retry("stream broken");
  }
  retry("stream ended");
}

connect();

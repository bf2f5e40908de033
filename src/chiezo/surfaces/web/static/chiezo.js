// Shared by every page: the page's configuration, its words, and calls to the REST API
// (with the bearer token when the server needs one; it is kept for this tab only).
"use strict";
const Chiezo = (() => {
  const config = JSON.parse(document.getElementById("chiezo-config").textContent);
  const TOKEN_KEY = "chiezo-token";

  function t(name, values = {}) {
    const text = config.messages[name] || name;
    return text.replace(/\{(\w+)\}/g, (whole, key) => (key in values ? values[key] : whole));
  }

  function headers(extra = {}) {
    const out = { Accept: "application/json", ...extra };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) out.Authorization = `Bearer ${token}`;
    return out;
  }

  // JSON in, JSON out; an error response becomes an Error carrying the API's own message.
  async function api(method, url, body) {
    const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(url, init);
    const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (!response.ok) {
      const error = new Error(data.error || `HTTP ${response.status}`);
      error.status = response.status;
      error.data = data;
      throw error;
    }
    return data;
  }

  // Server-sent events from a POST (EventSource only does GET): yields [event, data] pairs.
  async function* events(url, body) {
    const response = await fetch(url, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
      yield ["error", data];
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffered.indexOf("\n\n")) >= 0) {
        const block = buffered.slice(0, cut);
        buffered = buffered.slice(cut + 2);
        let name = "message";
        const lines = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) lines.push(line.slice(5).trimStart());
        }
        if (lines.length) yield [name, JSON.parse(lines.join("\n"))];
      }
    }
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  function saveToken(token) {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  // A model as a person reads it, never a path on the server's disk: the same rules as
  // model_label in formatting.py (tests/test_web_maps.py checks both on the same names).
  const MODEL_FILE = /\.(gguf|bin|onnx|safetensors|pt)$/i;
  const SPLIT_PART = /-\d{5}-of-\d{5}$/i;
  const QUANT = /[-_.]((?:UD-)?(?:[IT]?Q\d(?:_[0-9A-Z]+)*|B?F16|F32|FP16|FP8))$/i;
  const LOCAL = /^(?:[/~.\\]|[A-Za-z]:[/\\])/;
  const EMBEDDER_PATH = /^(onnx|st):(.+)$/;

  function modelLabel(name) {
    if (!name) return "";
    const embedder = EMBEDDER_PATH.exec(name);
    if (embedder) return `${embedder[1]}:${modelLabel(embedder[2]) || embedder[2]}`;
    if (!(LOCAL.test(name) || name.includes("\\") || MODEL_FILE.test(name))) return name;
    let stem = name.replace(/[/\\]+$/, "").split(/[/\\]/).pop();
    stem = stem.replace(MODEL_FILE, "").replace(SPLIT_PART, "");
    const quant = QUANT.exec(stem);
    return quant && quant.index > 0 ? `${stem.slice(0, quant.index)} (${quant[1]})` : stem;
  }

  return { config, t, api, events, el, saveToken, modelLabel };
})();

// The search page: choosing another source shows the filters that source has.
document.addEventListener("DOMContentLoaded", () => {
  const select = document.getElementById("source-select");
  if (select) select.addEventListener("change", () => {
    const form = select.form;
    for (const name of ["tag", "feature", "area", "near", "radius_km", "offset"]) {
      const input = form.elements[name];
      if (input) input.value = "";
    }
    form.submit();
  });
});

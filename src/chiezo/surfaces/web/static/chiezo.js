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

  return { config, t, api, events, el, saveToken, modelLabel, here: currentLocation() };

  // "Use my location" (core/here.py): the browser is asked only when a button is pressed, and
  // only on a secure page (loopback is one). The location lives in this variable alone —
  // never in storage or a cookie — shown as a countdown, never as numbers, and dropped when
  // the server would refuse it (taken_at + CHIEZO_LOCATION_TTL).
  function currentLocation() {
    let held = null; // {lat, lon, accuracy_m, taken_at}
    let timer = null;
    const listeners = [];
    const ttlMs = (config.location_ttl || 420) * 1000;
    const expiresAt = () => (held ? Date.parse(held.taken_at) + ttlMs : 0);

    function blocked() {
      if (!window.isSecureContext) return t("here.insecure");
      if (!("geolocation" in navigator)) return t("here.unsupported");
      return "";
    }

    function say(text) {
      for (const status of document.querySelectorAll("[data-here] .here-status")) status.textContent = text;
    }

    function tick() {
      const left = Math.round((expiresAt() - Date.now()) / 1000);
      if (left <= 0) return drop(true);
      const clock = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
      say(t("here.attached", { left: clock }));
    }

    function hold(location) {
      held = location;
      clearInterval(timer);
      if (Date.now() >= expiresAt()) return drop(true);
      timer = setInterval(tick, 1000);
      tick();
      for (const listener of listeners) listener("attached");
    }

    function drop(expired) {
      const had = held !== null;
      held = null;
      clearInterval(timer);
      say(expired && had ? t("here.expired") : "");
      if (had) for (const listener of listeners) listener(expired ? "expired" : "dropped");
    }

    // the location while the server would still take it, else null
    function get() {
      if (held && Date.now() >= expiresAt()) drop(true);
      return held;
    }

    function take() {
      return new Promise((resolve) => {
        if (blocked()) return resolve(null);
        say(t("here.locating"));
        navigator.geolocation.getCurrentPosition(
          (position) => {
            hold({
              lat: position.coords.latitude,
              lon: position.coords.longitude,
              accuracy_m: position.coords.accuracy,
              taken_at: new Date(position.timestamp).toISOString(),
            });
            resolve(held);
          },
          (error) => {
            say(error.code === 1 ? t("here.denied") : t("here.failed", { reason: error.message }));
            resolve(null);
          },
          // a fix taken now: a cached one would be older than it looks, and expire sooner
          { enableHighAccuracy: true, timeout: 20000, maximumAge: 0 },
        );
      });
    }

    // the REST form, LAT,LON,TAKEN_AT[,ACCURACY_M], and back
    const text = () => (held ? [held.lat, held.lon, held.taken_at, held.accuracy_m].filter((v) => v != null).join(",") : "");
    function fromText(value) {
      const [lat, lon, taken_at, accuracy] = String(value || "").split(",");
      if (!taken_at || Number.isNaN(Date.parse(taken_at))) return;
      hold({ lat: Number(lat), lon: Number(lon), taken_at, accuracy_m: accuracy ? Number(accuracy) : null });
    }

    // every "use my location" button, those a script adds later included
    function wire(button) {
      const why = blocked();
      if (why) {
        button.disabled = true;
        button.title = why;
      } else {
        button.addEventListener("click", () => take());
      }
      return button;
    }
    document.addEventListener("DOMContentLoaded", () => {
      for (const button of document.querySelectorAll("[data-here] .here-button")) wire(button);
    });

    return { get, take, text, fromText, wire, blocked, drop, on: (listener) => listeners.push(listener) };
  }
})();

// The search page: choosing another source shows the filters that source has.
document.addEventListener("DOMContentLoaded", () => {
  const select = document.getElementById("source-select");
  if (select) select.addEventListener("change", () => {
    const form = select.form;
    for (const name of ["tag", "feature", "area", "near", "radius_km", "offset", "location"]) {
      const input = form.elements[name];
      if (input) input.value = "";
    }
    form.submit();
  });
  hereOnTheSearchPage();
  hereOnTheMap();
});

// A near=here search sends the location in its address (a GET form): this page takes it
// back into the script's variable and out of the address bar, so that neither the history
// nor a bookmark keeps it; a near=here link followed while it is attached carries it again.
function hereOnTheSearchPage() {
  const form = document.getElementById("search-form");
  if (!form) return;
  const { here } = Chiezo;
  const url = new URL(window.location.href);
  if (url.searchParams.has("location")) {
    here.fromText(url.searchParams.get("location"));
    url.searchParams.delete("location");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  const hidden = document.getElementById("here-location");
  const near = () => form.elements.near;
  const nearHere = () => Boolean(near()) && near().value.trim().toLowerCase() === "here";
  here.on((what) => {
    if (what === "attached" && near()) {
      near().value = "here";
      near().disabled = false;
    }
    if (hidden && what === "attached") {
      hidden.value = here.text();
      hidden.disabled = false;
    } else if (hidden) {
      hidden.value = "";
      hidden.disabled = true;
    }
  });
  form.addEventListener("submit", () => {
    if (!hidden) return;
    const attached = nearHere() && here.get();
    hidden.value = attached ? here.text() : "";
    hidden.disabled = !attached;
  });
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    const target = new URL(link.href, window.location.href);
    if (target.origin !== window.location.origin || target.pathname !== "/") return;
    if ((target.searchParams.get("near") || "").toLowerCase() !== "here" || !here.get()) return;
    event.preventDefault();
    target.searchParams.set("location", here.text());
    window.location.assign(target.href);
  });
}

// The current location drawn on a result map (mapview.py, g.map-here) goes when it expires.
function hereOnTheMap() {
  for (const layer of document.querySelectorAll("svg.map g.map-here[data-expires-at]")) {
    const hide = () => layer.remove();
    const left = Number(layer.dataset.expiresAt) - Date.now();
    if (left <= 0) hide();
    else setTimeout(hide, Math.min(left, 2 ** 31 - 1));
  }
}

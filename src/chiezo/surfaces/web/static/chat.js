// Chat: the conversation goes to POST /v1/chat as a stream. The model is the speaker (its name
// heads each answer); the library only supplies the numbered sources the answer cites.
"use strict";
(() => {
  const { t, api, events, el, modelLabel, here } = Chiezo;
  const $ = (selector) => document.querySelector(selector);
  const history = [];
  let modelName = $("#chat").dataset.model || "";
  const SAVED = "chiezo-chat";

  // The conversation survives leaving the page (a citation opens its document; Back returns
  // here): kept for this tab only, as the messages' own markup and the turns sent to the model.
  function save() {
    sessionStorage.setItem(SAVED, JSON.stringify({ history, html: $("#messages").innerHTML }));
  }

  function restore() {
    const saved = JSON.parse(sessionStorage.getItem(SAVED) || "null");
    if (!saved) return;
    history.push(...saved.history);
    $("#messages").innerHTML = saved.html;
    for (const button of $("#messages").querySelectorAll(".here-button")) here.wire(button);
  }

  async function learnModel() {
    try {
      const status = await api("GET", "/v1/llm");
      modelName = modelLabel(status.model) || modelName;  // a name, never the server's path
      // the names quoted in a note or a problem ('/models/x.gguf') as names too
      const named = (text) => String(text || "").replace(/'([^']*)'/g, (_, name) => `'${modelLabel(name)}'`);
      const there = (e) => t("chat.models_there", { models: e.models.map(modelLabel).join(", ") || "—" });
      // the model that answers, then what the endpoint lists where that is more than it
      // (llama.cpp answers a name it does not list with its own model: a note says so)
      const used = status.endpoints.find((e) => e.ok);
      const listed = used && used.models && !(used.models.length === 1 && used.models[0] === used.model);
      const bad = status.endpoints.filter((e) => !e.ok)
        .map((e) => `${e.url}: ${named(e.problem)}` + (e.models ? ` (${there(e)})` : ""));
      const sized = status.endpoints.find((e) => e.ok && e.context);
      const context = sized ? t("chat.context", { tokens: sized.context.toLocaleString() }) : "";
      $("#chat-model-line").textContent = [
        modelName, used && used.note ? named(used.note) : "", listed ? there(used) : "", context, ...bad,
      ].filter(Boolean).join(" · ");
    } catch (error) {
      $("#chat-model-line").textContent = error.message;
    }
  }

  function message(role, speaker) {
    const body = el("div", { class: "text" });
    const item = el("li", { class: `message ${role}` }, el("div", { class: "speaker", text: speaker }), body);
    $("#messages").append(item);
    return { item, body };
  }

  // The answer's text with each [n] turned into a link to source n's document page, and each
  // sentence the claim check doubts marked, its reasons in the title.
  function withCitations(text, references, claims = []) {
    const out = document.createDocumentFragment();
    let last = 0;
    for (const claim of claims) {
      const at = text.indexOf(claim.text, last);
      if (at < 0 || !["unsupported", "uncited"].includes(claim.status)) continue;
      out.append(citationLinks(text.slice(last, at), references));
      const why = `${t(`chat.doubt.${claim.status}`)}: ${(claim.reasons || []).join("; ")}`;
      out.append(el("mark", { class: `doubt ${claim.status}`, title: why }, citationLinks(claim.text, references)));
      last = at + claim.text.length;
    }
    out.append(citationLinks(text.slice(last), references));
    return out;
  }

  function citationLinks(text, references) {
    const byNumber = new Map(references.map((r) => [String(r.n), r]));
    const out = document.createDocumentFragment();
    let last = 0;
    for (const match of text.matchAll(/\[(\d+(?:\s*[,，、]\s*\d+)*)\]/g)) {
      out.append(text.slice(last, match.index));
      const numbers = match[1].split(/\s*[,，、]\s*/);
      out.append("[");
      numbers.forEach((n, i) => {
        const ref = byNumber.get(n);
        if (i) out.append(", ");
        out.append(ref ? el("a", { class: "cite", href: docHref(ref), title: ref.title, text: n }) : n);
      });
      out.append("]");
      last = match.index + match[0].length;
    }
    out.append(text.slice(last));
    return out;
  }

  const docHref = (ref) => (ref.doc_id ? `/doc/${encodeURIComponent(ref.source)}/${ref.doc_id}`
                                        : /^https?:/i.test(ref.url || "") ? ref.url : "#");

  function sourceList(references, cited = []) {
    const list = el("ol", { class: "references" });
    for (const ref of references) {
      // a page of the web (rag --web, the agent's web_search): opened without telling it where from
      const link = ref.kind === "web"
        ? el("a", { href: docHref(ref), text: ref.title, rel: "noreferrer noopener", target: "_blank" })
        : el("a", { href: docHref(ref), text: ref.title });
      const item = el("li", { value: String(ref.n), id: `ref-${ref.n}` }, link, el("span", { class: "badge", text: ref.source }));
      if (cited.includes(ref.n)) item.classList.add("cited");
      list.append(item);
    }
    return el("details", { class: "sources", open: "" }, el("summary", { text: t("chat.sources") }), list);
  }

  // An error as its cause (`cause`: context_exceeded, timeout, model_missing, unreachable,
  // failed, bad_reply, cut_short) in the page's language, then the server's own words — the
  // sizes of a context that overflowed, the stage and setting of a timeout — and its hint.
  function showError(body, data) {
    const key = `chat.cause.${data.cause}`;
    const cause = data.cause && t(key) !== key ? t(key) : "";
    const alert = el("p", { class: "error", role: "alert", text: t("chat.error", { error: cause || data.error }) });
    alert.dataset.cause = data.cause || "";
    body.append(alert);
    const details = [];
    if (cause) details.push(data.error);
    if (data.prompt_tokens && data.context_tokens) {
      details.push(t("chat.context_sizes", { prompt: data.prompt_tokens.toLocaleString(), context: data.context_tokens.toLocaleString() }));
    }
    if (data.cause === "timeout" && data.setting) {
      details.push(t("chat.timeout_after", { seconds: data.seconds, setting: data.setting }));
    }
    if (details.length) body.append(el("p", { class: "muted small", text: details.join(" · ") }));
    if (data.models && data.models.length) body.append(el("p", { class: "muted small", text: t("chat.models_there", { models: data.models.join(", ") }) }));
    if (data.hint) body.append(el("p", { class: "muted small", text: data.hint }));
  }

  // What the question still needs (core/here.py Need: a location, a radius, which kind of
  // place), asked as the assistant's question; a location is given with the button beside it,
  // a kind by one of its choices (put in the box, to send or change).
  function showNeeds(body, needs) {
    const asked = [];
    for (const need of needs) {
      const line = el("p", { class: "ask", text: need.ask });
      line.dataset.need = need.what;
      if (need.what === "location") {
        line.append(" ", here.wire(el("button", { type: "button", class: "secondary here-button", text: t("here.use") })));
      }
      for (const choice of need.choices || []) {
        const pick = el("button", { type: "button", class: "secondary choice", text: choice });
        pick.addEventListener("click", () => {
          const input = $("#chat-input");
          input.value = input.value ? `${input.value} ${choice}` : choice;
          input.focus();
        });
        line.append(" ", pick);
      }
      body.append(line);
      asked.push(need.ask);
    }
    return asked.join(" ");
  }

  // How long each stage took and what it cost (plan, search, excerpts, tool, model), folded.
  function showStages(body, stages) {
    const total = stages.reduce((sum, s) => sum + (s.seconds || 0), 0);
    const list = el("ol", { class: "stages-list" });
    for (const s of stages) {
      list.append(el("li", { text: t("chat.stage_line", {
        stage: s.stage, name: s.name || "—", seconds: (s.seconds || 0).toFixed(2),
        tokens_in: (s.tokens_in || 0).toLocaleString(), tokens_out: (s.tokens_out || 0).toLocaleString(),
      }) }));
    }
    body.append(el("details", { class: "stages small" }, el("summary", { text: t("chat.stages", { seconds: total.toFixed(2) }) }), list));
  }

  async function ask(question) {
    history.push({ role: "user", content: question });
    message("user", t("chat.you")).body.textContent = question;
    const mode = $("#chat-mode").value;
    const grounded = $("#chat-grounded").checked;
    const { item, body } = message("assistant", modelName || t("chat.model_unknown"));
    item.dataset.state = "streaming";
    const status = el("p", { class: "status muted", text: t("chat.searching") });
    const steps = el("ol", { class: "steps" });
    const text = el("div", { class: "answer" });
    body.append(status, steps, text);
    let references = [];
    let written = "";
    const request = { messages: history.slice(), stream: true, mode, grounded };
    if ($("#chat-source").value) request.source = $("#chat-source").value;
    const location = here.get();  // for this turn only: the server checks its age again
    if (location) request.location = { ...location };
    $("#chat-send").disabled = true;
    try {
      for await (const [name, data] of events("/v1/chat", request)) {
        if (name === "references") {
          references = data.references || [];
          status.textContent = (data.queries || []).join(" · ");
        } else if (name === "step") {
          const args = typeof data.arguments === "object" ? JSON.stringify(data.arguments) : data.arguments || "";
          steps.append(el("li", { text: `${t("chat.step", { step: data.step, tool: data.tool })} ${args}` }));
        } else if (name === "delta") {
          written += data.text;
          // a reasoning model whose <think> was in its prompt sends only the closing tag: what
          // came before it was reasoning, never shown (answer/plan.py, ReasoningFilter)
          const thought = written.lastIndexOf("</think>");
          if (thought !== -1) written = written.slice(thought + "</think>".length).trimStart();
          text.textContent = written;
        } else if (name === "done") {
          references = data.references || references;
          written = data.answer || "";
          text.replaceChildren(withCitations(written, references, data.claims || []));
          const needs = data.needs || [];
          // an answer that asks back: its question, unless the answer already says it
          const asked = needs.length ? showNeeds(body, needs.filter((n) => !written.includes(n.ask))) : "";
          if (!written && asked) written = asked;
          if (data.model) item.querySelector(".speaker").textContent = modelLabel(data.model);
          const cited = data.cited || [];
          const doubts = (data.unsupported || []).length + (data.uncited || []).length;
          if (references.length) body.append(sourceList(references, cited));
          if (!data.no_basis && !cited.length && !needs.length) body.append(el("p", { class: "warn small", text: t("chat.uncited") }));
          else if (doubts) body.append(el("p", { class: "warn small", text: t("chat.doubts", { count: doubts }) }));
          if (data.only_from_sources === false) body.append(el("p", { class: "muted small", text: t("chat.ungrounded") }));
          for (const warning of data.warnings || []) body.append(el("p", { class: "muted small", text: warning }));
          if ((data.stages || []).length) showStages(body, data.stages);
          if (written) history.push({ role: "assistant", content: written,
                         cited_titles: references.filter((r) => cited.includes(r.n)).map((r) => r.title) });
        } else if (name === "error" && (data.needs || []).length) {
          // not a failure: the question cannot be answered until the person gives something
          const asked = showNeeds(body, data.needs);
          if (asked) history.push({ role: "assistant", content: asked });
          if ((data.stages || []).length) showStages(body, data.stages);
        } else if (name === "error") {
          showError(body, data);
          // no answer was written: the library's own sentences that answer, each cited
          const said = data.answer_sentences || [];
          if (said.length) {
            body.append(el("p", { class: "muted small", text: t("chat.library_says") }));
            const quoted = said.map((s) => `${s.text} [${s.ref}]`).join(" ");
            body.append(el("div", { class: "answer library" }, withCitations(quoted, data.excerpts || references)));
          }
          const found = data.excerpts || references;
          if (found.length) body.append(sourceList(found));
        }
      }
    } catch (error) {
      showError(body, { error: error.message });
    } finally {
      status.remove();
      item.dataset.state = "done";
      $("#chat-send").disabled = false;
      save();
    }
  }

  $("#chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = $("#chat-input");
    const question = input.value.trim();
    if (!question) return;
    input.value = "";
    ask(question);
  });
  $("#chat-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("#chat-form").requestSubmit();
    }
  });
  $("#chat-new").addEventListener("click", () => {
    history.length = 0;
    $("#messages").replaceChildren();
    sessionStorage.removeItem(SAVED);
  });
  // the location expired while the page was open: the conversation says so, in its place
  here.on((what) => {
    if (what !== "expired") return;
    message("note", "").body.append(el("p", { class: "muted small", text: t("here.expired") }));
    save();
  });
  restore();
  learnModel();
})();

// The admin page: rebuild / re-embed with a confirmation that says what will happen, live
// progress and the build log; notes added, edited and forgotten in place; the model endpoint.
"use strict";
(() => {
  const { t, api, el, saveToken, modelLabel } = Chiezo;
  const $ = (selector) => document.querySelector(selector);
  let polling = null;

  // -- sections re-read from the server after a change (one source of truth: the page) -----
  async function refresh(...ids) {
    const html = await (await fetch(location.pathname + location.search)).text();
    const fresh = new DOMParser().parseFromString(html, "text/html");
    for (const id of ids) {
      const now = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (now && next) now.replaceWith(next);
    }
  }

  function showError(where, error) {
    const box = el("p", { class: "error", role: "alert", text: error.message });
    if (error.data && error.data.hint) box.append(el("span", { class: "hint", text: " " + error.data.hint }));
    where.prepend(box);
    setTimeout(() => box.remove(), 12000);
  }

  // -- rebuild and re-embed ----------------------------------------------------------------
  function describe(plan) {
    const lines = [];
    const input = plan.input || {};
    const path = input.path || "?";
    if (plan.action === "rebuild") {
      lines.push(t("admin.confirm.rebuild", { source: plan.source, path, kind: plan.kind }));
      if (plan.fetch) lines.push(t("admin.confirm.fetch", { site: plan.fetch.from || "?", last: plan.fetch.last || "—" }));
      else if (input.exists === false) lines.push(t("admin.confirm.input_missing", { path }));
      lines.push(plan.embed_model ? t("admin.confirm.then_embed", { model: modelLabel(plan.embed_model) })
                                  : t("admin.confirm.no_embed"));
    } else {
      lines.push(t("admin.confirm.embed", { source: plan.source, model: modelLabel(plan.model) }));
    }
    lines.push(t("admin.confirm.serving", { generation: plan.generation || "—", docs: (plan.docs || 0).toLocaleString() }));
    if (plan.problem) lines.push(plan.problem.error + (plan.problem.hint ? ` (${plan.problem.hint})` : ""));
    return lines;
  }

  async function confirmAndStart(action, source, model, fetchAgain) {
    const query = new URLSearchParams({ source, action });
    if (action === "embed" && model) query.set("model", model);
    if (action === "rebuild" && fetchAgain) query.set("fetch", "true");
    let plan;
    try {
      plan = await api("GET", `/v1/jobs/plan?${query}`);
    } catch (error) {
      showError($("#sources"), error);
      return;
    }
    const text = $("#confirm-text");
    text.replaceChildren(...describe(plan).map((line) => el("p", { text: line })));
    $("#confirm-go").disabled = plan.ready === false;
    const dialog = $("#confirm");
    dialog.returnValue = "";
    dialog.showModal();
    dialog.addEventListener("close", async () => {
      if (dialog.returnValue !== "go") return;
      try {
        const body = { source, action };
        if (action === "embed" && model) body.model = model;
        if (action === "rebuild" && fetchAgain) body.fetch = true;
        const job = await api("POST", "/v1/jobs", body);
        follow(job.id);
      } catch (error) {
        showError($("#sources"), error);
      }
    }, { once: true });
  }

  function follow(jobId) {
    if (polling) clearTimeout(polling);
    const panel = $("#job-panel");
    panel.hidden = false;
    const cancel = $("#job-cancel");
    cancel.textContent = t("admin.job.cancel");
    cancel.disabled = cancel.dataset.writes === "off";
    $("#job-log").textContent = "";
    let logFrom = 0;
    const tick = async () => {
      let job;
      try {
        job = await api("GET", `/v1/jobs/${jobId}?log_from=${logFrom}`);
      } catch (error) {
        showError(panel, error);
        return;
      }
      $("#job-title").textContent = `#${job.id} ${job.action} ${job.source}`;
      const state = $("#job-state");
      state.textContent = t(`admin.job.${job.state}`);
      state.className = `state state-${job.state}`;
      panel.dataset.state = job.state;
      const cancel = $("#job-cancel");
      cancel.hidden = job.state !== "running";
      cancel.dataset.job = job.id;
      if (job.cancel_requested) {
        cancel.disabled = true;
        cancel.textContent = t("admin.job.cancelling");
      }
      const phase = job.phase || {};
      const share = job.state === "done" ? 1 : phase.total ? Math.min(phase.done / phase.total, 1) : null;
      const bar = $("#job-bar");
      bar.style.width = share === null ? "100%" : `${(share * 100).toFixed(1)}%`;
      bar.classList.toggle("indeterminate", share === null && job.state === "running");
      const counted = phase.total ? `${(phase.done || 0).toLocaleString()} / ${phase.total.toLocaleString()} ${phase.unit || ""}`
                                  : phase.done ? `${phase.done.toLocaleString()} ${phase.unit || ""}` : "";
      const rate = phase.rate ? `${Math.round(phase.rate).toLocaleString()} ${phase.unit || ""}/s` : "";
      const eta = phase.eta_s != null ? t("admin.job.eta", { s: Math.round(phase.eta_s) }) : "";
      $("#job-phase").textContent = [phase.name, counted, rate, eta,
                                     t("admin.job.elapsed", { s: (job.elapsed_s || 0).toFixed(1) })]
        .filter(Boolean).join(" · ");
      const log = $("#job-log");
      for (const line of job.log || []) {
        log.append(el("span", { class: `log-${line.level}`, text: `[${line.t.toFixed(1)}s] ${line.text}\n` }));
      }
      logFrom = job.log_next ?? (logFrom + (job.log || []).length);
      log.scrollTop = log.scrollHeight;
      if (job.state === "running") {
        polling = setTimeout(tick, 400);
      } else {
        if (job.error) log.append(el("span", { class: "log-error", text: `${job.error.error}\n` }));
        await refresh("sources", "jobs");
      }
    };
    tick();
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) {
      const row = button.closest(".source-card");
      const model = row.querySelector("select.model").value;
      const fetchAgain = row.querySelector("input.fetch");
      confirmAndStart(button.dataset.action, button.dataset.source, model, fetchAgain && fetchAgain.checked);
      return;
    }
    const cancel = event.target.closest("button.cancel-job");
    if (cancel) {
      cancelJob(cancel);
      return;
    }
    const shown = event.target.closest("button.show-job");
    if (shown) follow(shown.dataset.job);
  });

  // a job stops at its next progress update; the poll (or the list, refreshed) shows the end
  async function cancelJob(button) {
    button.disabled = true;
    button.textContent = t("admin.job.cancelling");
    try {
      await api("POST", `/v1/jobs/${button.dataset.job}/cancel`);
      if (button.id !== "job-cancel") follow(button.dataset.job);
    } catch (error) {
      showError($("#jobs"), error);
      await refresh("jobs");
    }
  }

  // -- notes -------------------------------------------------------------------------------
  const splitTags = (text) => text.split(/[,、]/).map((s) => s.trim()).filter(Boolean);

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (form.id === "token-form") {
      event.preventDefault();
      saveToken($("#token-input").value.trim());
      $("#token-input").value = "";
      return;
    }
    if (form.id === "note-form") {
      event.preventDefault();
      const body = { text: form.elements.text.value, tags: splitTags(form.elements.tags.value) };
      if (form.elements.title.value.trim()) body.title = form.elements.title.value.trim();
      try {
        await api("POST", "/v1/notes", body);
        form.reset();
        await refresh("notes");
      } catch (error) {
        showError(form, error);
      }
      return;
    }
    if (form.classList.contains("note-edit")) {
      event.preventDefault();
      const item = form.closest(".note-item");
      const body = { text: form.elements.text.value, tags: splitTags(form.elements.tags.value) };
      // an untouched title is not sent: a title taken from the first line follows the text
      const title = form.elements.title.value.trim();
      if (title !== item.dataset.title) body.title = title;
      const id = item.dataset.id;
      try {
        await api("PATCH", `/v1/notes/${id}`, body);
        await refresh("notes");
      } catch (error) {
        showError(form, error);
      }
    }
  });

  document.addEventListener("click", async (event) => {
    const item = event.target.closest(".note-item");
    if (!item) return;
    if (event.target.closest(".edit-note")) {
      const form = el("form", { class: "note-edit note-form" },
        el("input", { name: "title", "aria-label": t("note.title") }),
        el("textarea", { name: "text", rows: "4", required: "", "aria-label": t("note.text") }),
        el("input", { name: "tags", "aria-label": t("note.tags") }),
        el("button", { type: "submit", text: t("note.save") }),
        el("button", { type: "button", class: "secondary cancel-edit", text: t("admin.cancel") }));
      form.elements.title.value = item.dataset.title;
      form.elements.text.value = item.dataset.text;
      form.elements.tags.value = item.dataset.tags;
      item.querySelector(".note-view").hidden = true;
      item.append(form);
      form.elements.text.focus();
    } else if (event.target.closest(".cancel-edit")) {
      item.querySelector(".note-edit").remove();
      item.querySelector(".note-view").hidden = false;
    } else if (event.target.closest(".forget-note")) {
      if (!confirm(t("note.confirm_forget", { title: item.dataset.title }))) return;
      try {
        await api("DELETE", `/v1/notes/${item.dataset.id}`);
        await refresh("notes");
      } catch (error) {
        showError(item, error);
      }
    }
  });

  // -- the model endpoint ------------------------------------------------------------------
  async function showModel() {
    const box = $("#llm-status");
    try {
      const status = await api("GET", "/v1/llm");
      if (!status.configured) {
        box.textContent = t("admin.llm.off");
        return;
      }
      box.replaceChildren(...status.endpoints.map((e) => el("p", { class: e.ok ? "ok" : "warn" },
        el("span", { class: "mono", text: e.url + " — " }),
        e.ok ? t("admin.llm.ok", { model: modelLabel(e.model) || "?" }) : t("admin.llm.bad", { problem: e.problem || "?" }),
        e.models && e.models.length ? el("span", { class: "muted small", text: ` (${e.models.map(modelLabel).join(", ")})` }) : "",
        // the tokens one request may hold, and who said so (answers are fitted to it)
        e.context ? el("span", { class: "muted small", text: ` · ${t("admin.llm.context", { tokens: e.context.toLocaleString(), source: e.context_source })}` }) : "")));
      box.classList.remove("muted");
    } catch (error) {
      box.textContent = error.message;
    }
  }
  showModel();
})();

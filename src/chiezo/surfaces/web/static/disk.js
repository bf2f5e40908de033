// The admin page's disk section: reclaim space (POST /admin/disk, a write like any other:
// the token is sent when the server needs one), then show the section as the server now sees it.
"use strict";
(() => {
  const { t, api, el } = Chiezo;

  function size(bytes) {
    const units = [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
    for (const [unit, scale] of units) if (bytes >= scale) return `${(bytes / scale).toFixed(1)} ${unit}`;
    return `${bytes} B`;
  }

  async function refreshSection() {
    const html = await (await fetch(location.pathname + location.search)).text();
    const next = new DOMParser().parseFromString(html, "text/html").getElementById("disk");
    if (next) document.getElementById("disk").replaceWith(next);
  }

  // on the document: the section (and its form) is replaced after each reclaim
  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (form.id !== "disk-form") return;
    event.preventDefault();
    if (!window.confirm(t("admin.disk.confirm"))) return;
    const button = form.querySelector("button");
    button.disabled = true;
    let message;
    try {
      const done = await api("POST", "/admin/disk", { caches: form.elements.caches.checked });
      message = el("p", { class: "ok", role: "status", text: t("admin.disk.done", { size: size(done.freed) }) });
      if (done.skipped.length) {
        const what = done.skipped.map((s) => `${s.path.split("/").pop()} (${s.why})`).join(", ");
        message.append(el("span", { class: "small", text: " " + t("admin.disk.skipped", { what }) }));
      }
      await refreshSection();
    } catch (error) {
      message = el("p", { class: "error", role: "alert", text: error.message });
      button.disabled = false;
    }
    document.getElementById("disk").append(message);
  });
})();

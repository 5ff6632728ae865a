// Push: the providers' keys (fingerprint, last refusal, never the key), the settings (an admin
// changes them), a test send to one user's devices with each provider's answer, and the recent
// sends, newest first.
import { api } from "../api.js";
import { action, confirmAction, field, fmtDate, h, notify, page, table } from "../ui.js";

export default async function push(_rest, { may }) {
  const setup = await api("GET", "/auth/v1/admin/push");
  const keys = table("Provider keys", [
    { label: "Provider", value: (c) => c.provider }, { label: "Fingerprint", value: (c) => c.fingerprint },
    { label: "Settings", value: (c) => Object.entries(c.settings || {}).map(([k, v]) => `${k}: ${v}`).join(", ") },
    { label: "Last refusal", value: (c) => (c.last_error ? `${c.last_error} (${fmtDate(c.last_error_at)})` : "none") },
    { label: "Updated", value: (c) => fmtDate(c.updated_at) }], setup.credentials);
  const parts = [keys];
  const current = setup.settings || {};
  if (may("admin")) {
    parts.push(settingsForm(current));
    parts.push(testSend());
  } else {
    parts.push(h("h2", {}, "Settings"), h("dl", { class: "facts" }, Object.entries(current).map(([k, v]) =>
      [h("dt", {}, k), h("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v))])));
  }
  parts.push(await recentSends());
  return page("Push", ...parts);
}

// The whole settings object is sent: the API replaces it (a field left out takes its default).
function settingsForm(current) {
  const limit = h("input", { name: "daily_limit", type: "number", min: "0", max: "100", required: true, value: String(current.daily_limit ?? 5) });
  const optIn = h("input", { name: "require_opt_in", type: "checkbox" });
  optIn.checked = current.require_opt_in ?? true;
  const silent = h("input", { name: "silent_without_consent", type: "checkbox" });
  silent.checked = current.silent_without_consent ?? false;
  const locale = h("select", { name: "default_locale" }, ["fr", "en"].map((l) => h("option", { value: l }, l)));
  locale.value = current.default_locale || "fr";
  const templates = h("textarea", { name: "templates", rows: "6", spellcheck: "false" }, JSON.stringify(current.templates || {}, null, 2));
  return h("form", { class: "card", "aria-label": "Push settings" }, h("h2", {}, "Settings"),
    field("Pushes per user per day (0 turns them off)", limit), field("Only to users who said yes", optIn),
    field("Silent sync hints without consent", silent), field("Default language", locale),
    field("Templates by language and kind: {\"en\": {\"credits\": {\"title\": …, \"body\": …}}}", templates),
    action("Save settings", async () => {
      let parsed;
      try { parsed = JSON.parse(templates.value || "{}"); } catch { notify("Templates must be JSON.", "error"); return; }
      if (!(await confirmAction("Save the push settings? They apply to the next send."))) return;
      const r = await api("PUT", "/auth/v1/admin/push/settings", {
        daily_limit: Number(limit.value), require_opt_in: optIn.checked, silent_without_consent: silent.checked,
        default_locale: locale.value, templates: parsed });
      notify(`Saved: at most ${r.settings.daily_limit} a day, default language ${r.settings.default_locale}.`, "ok");
    }, { class: "primary" }));
}

function testSend() {
  const user = h("input", { name: "user_id", required: true, placeholder: "user id" });
  const out = h("div", { "aria-live": "polite" });
  return h("form", { class: "card", "aria-label": "Test send" }, h("h2", {}, "Test send"), field("User id", user),
    action("Send a test push", async () => {
      if (!(await confirmAction("Send a test notification to every device of this user?"))) return;
      const r = await api("POST", "/auth/v1/admin/push/test", { user_id: user.value.trim() });
      out.replaceChildren(table(`Notification ${r.notification_id}: each device's answer`, [
        { label: "Device", value: (x) => x.device_id || "—" }, { label: "Provider", value: (x) => x.provider || "—" },
        { label: "Outcome", value: (x) => x.outcome }, { label: "Status", value: (x) => (x.status_code ? String(x.status_code) : "—") },
        { label: "Reason", value: (x) => x.reason || "—" }], r.results));
    }, { class: "primary" }), out);
}

async function recentSends() {
  const box = h("div", {});
  let before = null;
  async function load(more) {
    const q = new URLSearchParams({ limit: "50" });
    if (more && before) q.set("before", before);
    const r = await api("GET", `/auth/v1/admin/push/sends?${q}`);
    before = r.next_before ?? null;
    const t = table("Recent sends", [
      { label: "Sent", value: (x) => fmtDate(x.sent_at) }, { label: "Kind", value: (x) => x.kind },
      { label: "User", value: (x) => h("a", { href: `#/users/${x.user_id}` }, x.user_id) },
      { label: "Device", value: (x) => x.device_id || "—" }, { label: "Provider", value: (x) => x.provider || "—" },
      { label: "Outcome", value: (x) => x.outcome }, { label: "Status", value: (x) => (x.status_code ? String(x.status_code) : "—") },
      { label: "Reason", value: (x) => x.reason || "—" }], r.sends);
    box.replaceChildren(t, before ? action("Older sends", () => load(true)) : h("p", {}, "The oldest send is shown."));
  }
  await load(false);
  return box;
}

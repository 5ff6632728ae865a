// Push: the providers' keys (fingerprint, last refusal, never the key), the settings, and a
// test send to one user's devices with each provider's answer.
import { api } from "../api.js";
import { action, confirmAction, field, fmtDate, h, page, table } from "../ui.js";

export default async function push(_rest, { may }) {
  const setup = await api("GET", "/auth/v1/admin/push");
  const keys = table("Provider keys", [
    { label: "Provider", value: (c) => c.provider }, { label: "Fingerprint", value: (c) => c.fingerprint },
    { label: "Settings", value: (c) => Object.entries(c.settings || {}).map(([k, v]) => `${k}: ${v}`).join(", ") },
    { label: "Last refusal", value: (c) => (c.last_error ? `${c.last_error} (${fmtDate(c.last_error_at)})` : "none") },
    { label: "Updated", value: (c) => fmtDate(c.updated_at) }], setup.credentials);
  const settings = h("dl", { class: "facts" }, Object.entries(setup.settings || {}).map(([k, v]) => [h("dt", {}, k), h("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v))]));
  const parts = [keys, h("h2", {}, "Settings"), settings];
  if (may("admin")) {
    const user = h("input", { name: "user_id", required: true, placeholder: "user id" });
    const out = h("div", { "aria-live": "polite" });
    parts.push(h("form", { class: "card", "aria-label": "Test send" }, h("h2", {}, "Test send"), field("User id", user),
      action("Send a test push", async () => {
        if (!(await confirmAction("Send a test notification to every device of this user?"))) return;
        const r = await api("POST", "/auth/v1/admin/push/test", { user_id: user.value.trim() });
        out.replaceChildren(table(`Notification ${r.notification_id}: each device's answer`, [
          { label: "Device", value: (x) => x.device_id || "—" }, { label: "Provider", value: (x) => x.provider || "—" },
          { label: "Outcome", value: (x) => x.outcome }, { label: "Status", value: (x) => (x.status_code ? String(x.status_code) : "—") },
          { label: "Reason", value: (x) => x.reason || "—" }], r.results));
      }, { class: "primary" }), out));
  }
  return page("Push", ...parts);
}

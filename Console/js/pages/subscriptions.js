// Subscriptions: each store's settings as stored (a secret is said to exist, never shown).
import { api } from "../api.js";
import { fmtDate, h, page, table } from "../ui.js";

export default async function subscriptions() {
  const r = await api("GET", "/subscription/v1/admin/stores");
  const t = table("Stores", [
    { label: "Store", value: (s) => s.store },
    { label: "Settings", value: (s) => Object.entries(s.settings || {}).filter(([k]) => k !== "root_certificates_der_base64").map(([k, v]) => `${k}: ${v}`).join(", ") },
    { label: "Secret stored", value: (s) => (s.has_secret ? "yes" : "no") }, { label: "Version", value: (s) => String(s.version) },
    { label: "Updated", value: (s) => fmtDate(s.updated_at) }], r.stores);
  return page("Subscriptions", t, h("p", {}, "A player's purchases, credits and grants are on their page under Users."));
}

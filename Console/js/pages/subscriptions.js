// Subscriptions: the plans the app sells, each store's settings as stored (a secret is said to
// exist, never shown) and the store notifications received, newest first, with what each did.
import { api } from "../api.js";
import { action, fmtDate, h, page, table } from "../ui.js";

export default async function subscriptions() {
  const [plans, stores] = await Promise.all([api("GET", "/subscription/v1/admin/plans"), api("GET", "/subscription/v1/admin/stores")]);
  const planTable = table("Plans", [
    { label: "Plan", value: (p) => p.name }, { label: "Period", value: (p) => p.plan_type },
    { label: "Price", value: (p) => `${p.price.toFixed(2)} ${p.currency}` },
    { label: "Trial", value: (p) => (p.trial_enabled ? `${p.trial_duration_days} days` : "none") },
    { label: "App Store product", value: (p) => p.apple_product_id || "—" },
    { label: "Google Play product", value: (p) => p.google_product_id || "—" },
    { label: "Saving vs monthly", value: (p) => p.discount_vs_monthly || "—" }], plans.plans);
  const storeTable = table("Stores", [
    { label: "Store", value: (s) => s.store },
    { label: "Settings", value: (s) => Object.entries(s.settings || {}).filter(([k]) => k !== "root_certificates_der_base64").map(([k, v]) => `${k}: ${v}`).join(", ") },
    { label: "Secret stored", value: (s) => (s.has_secret ? "yes" : "no") }, { label: "Version", value: (s) => String(s.version) },
    { label: "Updated", value: (s) => fmtDate(s.updated_at) }], stores.stores);

  const events = h("div", {});
  let before = null;
  async function load(more) {
    const q = new URLSearchParams({ limit: "50" });
    if (more && before) q.set("before", before);
    const r = await api("GET", `/subscription/v1/admin/store-events?${q}`);
    before = r.next_before ?? null;
    const t = table("Recent store events", [
      { label: "Received", value: (e) => fmtDate(e.received_at) }, { label: "Store", value: (e) => e.store },
      { label: "Notification", value: (e) => (e.subtype ? `${e.notification_type} (${e.subtype})` : e.notification_type) },
      { label: "Original transaction", value: (e) => e.original_transaction_id || "—" }, { label: "Outcome", value: (e) => e.result }], r.events);
    events.replaceChildren(t, before ? action("Older events", () => load(true)) : h("p", {}, "The oldest event is shown."));
  }
  await load(false);
  return page("Subscriptions", planTable, storeTable, events, h("p", {}, "A player's purchases, credits and grants are on their page under Users."));
}

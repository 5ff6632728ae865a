// Audit: every operator request of each service, newest first, by member or key.
import { api } from "../api.js";
import { action, field, fmtDate, h, page, table } from "../ui.js";

const SERVICES = ["auth", "subscription", "offline", "ads"];

export default async function audit() {
  const service = h("select", { name: "service" }, SERVICES.map((s) => h("option", { value: s }, s)));
  const who = h("input", { name: "operator", placeholder: "member:<id>:<email>, operator_key, platform" });
  const out = h("div", {});
  let before = null;

  async function load(more) {
    const q = new URLSearchParams({ limit: "50" });
    if (who.value.trim()) q.set("operator", who.value.trim());
    if (more && before) q.set("before", String(before));
    const r = await api("GET", `/${service.value}/v1/admin/audit?${q}`);
    before = r.next_before ?? null;
    const t = table(`${service.value}: operator requests`, [
      { label: "When", value: (e) => fmtDate(e.at) }, { label: "Operator", value: (e) => e.operator },
      { label: "Request", value: (e) => `${e.method} ${e.path}` }, { label: "Status", value: (e) => String(e.status) },
      { label: "Request id", value: (e) => e.request_id || "—" }], r.entries);
    out.replaceChildren(t, before ? action("Older entries", () => load(true)) : h("p", {}, "The oldest entry is shown."));
  }
  const form = h("form", { class: "card row" }, field("Service", service), field("Operator", who), action("Show", () => load(false), { class: "primary" }));
  await load(false);
  return page("Audit", form, out);
}

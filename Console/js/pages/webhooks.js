// Webhooks: endpoints, each one's deliveries (status, answer, latency), replay, secret rotation
// with the overlap shown. A secret is shown once, when made; never again.
import { api } from "../api.js";
import { action, confirmAction, field, fmtDate, h, notify, page, table } from "../ui.js";

const EVENTS = ["*", "subscription.activated", "subscription.renewed", "subscription.expired", "subscription.refunded", "subscription.cancelled",
  "credits.earned", "credits.spent", "campaign.completed", "user.created", "user.deleted", "consent.changed", "sync.conflict_opened", "download.completed"];

function secretOnce(s) {
  return h("div", { class: "notice warn" }, h("p", {}, "The signing secret, shown this once (store it now):"), h("code", { class: "secret" }, s.secret));
}

async function deliveries(id, may) {
  const ep = await api("GET", `/auth/v1/admin/webhooks/${id}`);
  const out = h("div", {});
  const list = h("div", {});
  let before = null;
  async function load(more) {
    const q = new URLSearchParams({ limit: "50" });
    if (more && before) q.set("before", before);
    const d = await api("GET", `/auth/v1/admin/webhooks/${id}/deliveries?${q}`);
    before = d.next_before ?? null;
    list.replaceChildren(deliveryTable(id, ep, d.deliveries, may), before ? action("Older deliveries", () => load(true)) : h("p", {}, "The oldest delivery is shown."));
  }
  await load(false);
  const overlap = ep.previous_secret_expires_at
    ? h("p", { class: "notice warn" }, `The previous secret still signs until ${fmtDate(ep.previous_secret_expires_at)} (both signatures are sent).`) : null;
  const rotate = may("admin") ? action("Rotate the secret", async () => {
    if (!(await confirmAction("Make a new signing secret? The old one keeps signing for the overlap."))) return;
    const s = await api("POST", `/auth/v1/admin/webhooks/${id}/rotate-secret`);
    out.replaceChildren(secretOnce(s), h("p", {}, `The previous secret signs until ${fmtDate(s.endpoint.previous_secret_expires_at)}.`));
  }) : null;
  return page(`Webhook ${ep.url}`, h("p", {}, `Events: ${ep.events.join(", ")}${ep.disabled ? ` · disabled: ${ep.disabled_reason || ""}` : ""}`),
    overlap, out, h("p", { class: "row" }, action("Reload", () => { location.hash = `#/webhooks/${id}/${Date.now()}`; }), rotate), list);
}

function deliveryTable(id, ep, rows, may) {
  return table("Deliveries, newest first", [
    { label: "Event", value: (x) => x.event_type }, { label: "Status", value: (x) => h("span", { class: "status " + x.status }, x.status) },
    { label: "Attempts", value: (x) => String(x.attempts) }, { label: "Answer", value: (x) => (x.answer_code ? String(x.answer_code) : x.last_error || "—") },
    { label: "Latency", value: (x) => (x.latency_ms !== undefined ? `${x.latency_ms} ms` : "—") }, { label: "Created", value: (x) => fmtDate(x.created_at) },
    { label: "", value: (x) => (may("admin") && x.status !== "sending" ? action("Replay", async () => {
      if (!(await confirmAction(`Send ${x.event_type} to ${ep.url} again?`))) return;
      await api("POST", `/auth/v1/admin/webhooks/${id}/deliveries/${x.id}/replay`);
      notify("Queued again: reload to see it delivered.", "ok");
    }) : "") }], rows);
}

export default async function webhooks(rest, { may }) {
  if (rest[0]) return deliveries(rest[0], may);
  const r = await api("GET", "/auth/v1/admin/webhooks");
  const out = h("div", {});
  const t = table("Endpoints", [
    { label: "URL", value: (e) => h("a", { href: "#/webhooks/" + e.id }, e.url) }, { label: "Events", value: (e) => e.events.join(", ") },
    { label: "State", value: (e) => (e.disabled ? "disabled" : "enabled") }, { label: "Description", value: (e) => e.description || "" }], r.endpoints);
  const parts = [t, out];
  if (may("admin")) {
    const url = h("input", { type: "url", name: "url", required: true, placeholder: "https://game.example.com/hooks" });
    const events = h("select", { name: "events", multiple: true, size: "6" }, EVENTS.map((e) => h("option", { value: e, selected: e === "*" }, e)));
    parts.push(h("form", { class: "card", "aria-label": "New endpoint" }, h("h2", {}, "New endpoint"), field("URL", url), field("Events", events),
      action("Add endpoint", async () => {
        if (!(await confirmAction(`Send events to ${url.value}?`))) return;
        const s = await api("POST", "/auth/v1/admin/webhooks", { url: url.value, events: [...events.selectedOptions].map((o) => o.value) });
        out.replaceChildren(secretOnce(s));
      }, { class: "primary" })));
  }
  return page("Webhooks", ...parts);
}

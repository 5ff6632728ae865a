// Users: find a player by e-mail or id; their account, credits and timeline; support actions
// (credits, premium), each with a reason that goes to the ledger and the audit.
import { api } from "../api.js";
import { action, confirmAction, fail, field, fmtDate, h, notify, page, table } from "../ui.js";

const TIMELINE_PAGE = 50, TIMELINE_MAX = 500;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function account(u) {
  const rows = [["Id", u.id], ["E-mail", u.email || "—"], ["Verified", u.email_verified ? "yes" : "no"], ["Status", u.status],
    ["Sign-in methods", (u.sign_in_methods || []).join(", ") || "—"], ["Live sessions", u.live_sessions],
    ["Created", fmtDate(u.created_at)], ["Last sign-in", fmtDate(u.last_login)],
    ["Deletion scheduled", u.deletion_scheduled_at ? fmtDate(u.deletion_scheduled_at) : "no"]];
  return h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
}

/// The customer timeline as a timeline: newest first, each service's events marked; `more`
/// asks for a longer one (the API merges four services' events, so it pages by length).
function timeline(t, more) {
  const list = h("ol", { class: "timeline", "aria-label": "Customer timeline" },
    t.events.map((e) => h("li", { class: "event " + e.service },
      h("time", { datetime: e.at }, fmtDate(e.at)), " ",
      h("span", { class: "service" }, e.service), " ",
      h("strong", {}, e.kind), h("p", {}, e.summary))));
  const missing = (t.incomplete || []).length ? h("p", { class: "notice warn" }, "Not answered in time: " + t.incomplete.join(", ")) : null;
  const older = more ? action("Older events", more) : null;
  return h("section", { "aria-labelledby": "tl" }, h("h2", { id: "tl" }, "Timeline"), missing, t.events.length ? list : h("p", {}, "Nothing yet."), older);
}

function creditsPanel(id, credits, may, reload) {
  const parts = [h("p", { class: "balance" }, "Balance: ", h("strong", { "data-balance": String(credits.balance) }, `${credits.balance} credits`))];
  if (may("support")) {
    const amount = h("input", { type: "number", name: "amount", min: "-100000", max: "100000", required: true });
    const reason = h("input", { name: "reason", required: true, maxlength: "500" });
    const days = h("input", { type: "number", name: "days", min: "1", max: "366", value: "30" });
    const premiumReason = h("input", { name: "premium_reason", maxlength: "500" });
    parts.push(h("form", { class: "card", "aria-label": "Grant credits" }, h("h3", {}, "Grant or take credits"),
      field("Amount (negative takes)", amount), field("Reason (the ticket)", reason),
      action("Grant credits", async () => {
        const n = Number(amount.value);
        if (!Number.isInteger(n) || n === 0 || !reason.value.trim()) { notify("An amount (not 0) and a reason are needed.", "error"); return; }
        if (!(await confirmAction(`${n > 0 ? "Grant" : "Take"} ${Math.abs(n)} credits ${n > 0 ? "to" : "from"} this user?`))) return;
        const r = await api("POST", `/subscription/v1/admin/users/${id}/credits`, { amount: n, reason: reason.value.trim() },
          { "Idempotency-Key": crypto.randomUUID() });
        notify(`Done: the balance is now ${r.balance}.`, "ok");
        await reload();
      }, { class: "primary" })));
    parts.push(h("form", { class: "card", "aria-label": "Premium" }, h("h3", {}, "Premium"),
      field("Days", days), field("Reason (the ticket)", premiumReason),
      action("Grant premium", async () => {
        if (!premiumReason.value.trim()) { notify("A reason is needed.", "error"); return; }
        if (!(await confirmAction(`Grant ${days.value} days of premium?`))) return;
        const r = await api("POST", `/subscription/v1/admin/users/${id}/premium`, { days: Number(days.value), reason: premiumReason.value.trim() },
          { "Idempotency-Key": crypto.randomUUID() });
        notify(`Premium until ${fmtDate(r.valid_until)}.`, "ok");
        await reload();
      }),
      action("End granted premium", async () => {
        if (!premiumReason.value.trim()) { notify("A reason is needed.", "error"); return; }
        if (!(await confirmAction("End the premium granted by support?"))) return;
        const r = await api("DELETE", `/subscription/v1/admin/users/${id}/premium`, { reason: premiumReason.value.trim() });
        notify(`Ended ${r.ended.length} grant(s).`, "ok");
        await reload();
      })));
  }
  parts.push(table("Recent credit movements", [
    { label: "When", value: (t) => fmtDate(t.created_at) }, { label: "Amount", value: (t) => (t.amount > 0 ? "+" : "") + t.amount },
    { label: "Source", value: (t) => t.source }, { label: "Balance after", value: (t) => String(t.balance_after) }],
  credits.transactions.slice(0, 20)));
  return h("section", { "aria-labelledby": "cr" }, h("h2", { id: "cr" }, "Credits"), ...parts);
}

/// Acting on the account itself: sign out everywhere, cancel a scheduled deletion.
function accountActions(user, may, reload) {
  if (!may("support")) return null;
  const reason = h("input", { name: "account_reason", maxlength: "500" });
  const needReason = () => { if (!reason.value.trim()) { notify("A reason is needed.", "error"); return false; } return true; };
  return h("form", { class: "card", "aria-label": "Account actions" }, h("h3", {}, "Account"), field("Reason (the ticket)", reason),
    action("Sign out everywhere", async () => {
      if (!needReason() || !(await confirmAction("Sign this user out on every device? Their devices stop receiving pushes too."))) return;
      const r = await api("POST", `/auth/v1/admin/users/${user.id}/sessions/revoke`, { reason: reason.value.trim() });
      notify(`Signed out: ${r.revoked_sessions} session(s) ended.`, "ok");
      await reload();
    }),
    user.deletion_scheduled_at ? action("Cancel the scheduled deletion", async () => {
      if (!needReason() || !(await confirmAction("Cancel this account's scheduled deletion?"))) return;
      await api("POST", `/auth/v1/admin/users/${user.id}/deletion/cancel`, { reason: reason.value.trim() });
      notify("The deletion is cancelled.", "ok");
      await reload();
    }) : null);
}

export default async function users(rest, { may }) {
  const query = h("input", { name: "q", type: "search", required: true, placeholder: "player@example.com or a user id", value: decodeURIComponent(rest[0] || "") });
  const out = h("div", { id: "user" });
  const form = h("form", { role: "search", class: "card" }, field("E-mail or user id", query), h("button", { type: "submit", class: "primary" }, "Find"));

  async function show(q) {
    const user = UUID.test(q) ? await api("GET", `/auth/v1/admin/users/${q}`) : await api("GET", `/auth/v1/admin/users?email=${encodeURIComponent(q)}`);
    const reload = () => show(user.id).catch(fail);
    const [credits, tl] = await Promise.all([
      api("GET", `/subscription/v1/admin/users/${user.id}/credits`),
      api("GET", `/auth/v1/admin/users/${user.id}/timeline?limit=${TIMELINE_PAGE}`),
    ]);
    const shown = timeline(tl, longer(user.id, TIMELINE_PAGE, tl));
    out.replaceChildren(h("h2", {}, user.email || user.id), account(user), accountActions(user, may, reload),
      creditsPanel(user.id, credits, may, reload), shown);
  }
  // A full page may have more behind it: the next asks for PAGE more, up to the API's bound.
  function longer(id, limit, tl) {
    if (tl.events.length < limit || limit >= TIMELINE_MAX) return null;
    return async () => {
      const next = Math.min(TIMELINE_MAX, limit + TIMELINE_PAGE);
      const more = await api("GET", `/auth/v1/admin/users/${id}/timeline?limit=${next}`);
      document.querySelector("#user section[aria-labelledby=tl]").replaceWith(timeline(more, longer(id, next, more)));
    };
  }
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    out.replaceChildren(h("p", {}, "Looking…"));
    try { await show(query.value.trim()); } catch (e) { out.replaceChildren(); fail(e); }
  });
  if (query.value) show(query.value).catch(fail);
  return page("Users", form, out);
}

// Team: members and their roles, pending invites, the second-factor rule. Owners change it;
// the others read it (the service refuses their changes anyway: 403 insufficient_role).
import { api, currentSession } from "../api.js";
import { action, confirmAction, field, fmtDate, h, notify, notifyNext, page, table } from "../ui.js";

const ROLES = ["viewer", "support", "admin", "owner"];

export default async function team(_rest, { may }) {
  const [t, app] = await Promise.all([api("GET", "/auth/v1/admin/members"), api("GET", "/auth/v1/admin/app")]);
  const owner = may("owner");
  const me = currentSession().member;
  const reload = () => { location.hash = "#/team/" + Date.now(); };

  const roleCell = (m) => {
    if (!owner || m.id === me.id) return m.role;
    const select = h("select", { "aria-label": `Role of ${m.email}` }, ROLES.map((r) => h("option", { value: r, selected: r === m.role }, r)));
    select.addEventListener("change", async () => {
      if (!(await confirmAction(`Make ${m.email} ${select.value}?`))) { select.value = m.role; return; }
      try { await api("PATCH", `/auth/v1/admin/members/${m.id}`, { role: select.value }); notify(`${m.email} is now ${select.value}.`, "ok"); }
      catch (e) { select.value = m.role; throw e; }
    });
    return select;
  };
  const members = table("Members", [
    { label: "E-mail", value: (m) => m.email }, { label: "Role", value: roleCell },
    { label: "Authenticator", value: (m) => (m.totp ? "yes" : "no") }, { label: "Since", value: (m) => fmtDate(m.created_at) },
    { label: "", value: (m) => (owner && m.id !== me.id ? action("Remove", async () => {
      if (!(await confirmAction(`Remove ${m.email} from the team? Their session ends everywhere within seconds.`))) return;
      await api("DELETE", `/auth/v1/admin/members/${m.id}`);
      notifyNext(`${m.email} is no longer a member.`, "ok");
      reload();
    }) : "") },
  ], t.members);
  const invites = table("Pending invites", [
    { label: "E-mail", value: (i) => i.email }, { label: "Role", value: (i) => i.role }, { label: "Expires", value: (i) => fmtDate(i.expires_at) },
  ], t.invites);

  // Keys are for automation (issued and revoked with `auth-service admin operator-keys`): their
  // prefix and dates only, never the key.
  const keys = table("Operator keys", [
    { label: "Name", value: (k) => k.name }, { label: "Prefix", value: (k) => k.prefix },
    { label: "Created", value: (k) => fmtDate(k.created_at) }, { label: "Revoked", value: (k) => (k.revoked_at ? fmtDate(k.revoked_at) : "no") }],
  app.operator_keys);
  const parts = [h("p", {}, `${app.name}: ${app.active ? "active" : "disabled"} · app key ${app.api_key_prefix}…`), members, invites, keys];
  // Your own authenticator, if you joined without one (an owner may then require it of everybody).
  const mine = t.members.find((m) => m.id === me.id);
  if (mine && !mine.totp) {
    const out = h("div", {});
    parts.push(h("section", { class: "card", "aria-labelledby": "my-totp" }, h("h2", { id: "my-totp" }, "Your authenticator"),
      h("p", {}, "You signed in with a password only. Add an authenticator app as a second factor."), out,
      action("Set up an authenticator", async () => {
        const fresh = await api("POST", "/auth/v1/console/me/totp/new");
        const code = h("input", { name: "my_totp_code", inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}" });
        out.replaceChildren(
          h("p", {}, "Add this secret to your authenticator app: ", h("code", { class: "secret" }, fresh.totp_secret)),
          h("p", {}, h("a", { href: fresh.totp_uri }, "Open in an authenticator on this device")),
          field("Its current code", code),
          action("Confirm the authenticator", async () => {
            await api("PUT", "/auth/v1/console/me/totp", { totp_secret: fresh.totp_secret, totp_code: code.value.trim() });
            notifyNext("Your authenticator is set up: sign-ins ask for its code from now on.", "ok");
            reload();
          }, { class: "primary" }));
      })));
  }
  if (owner) {
    const email = h("input", { type: "email", name: "invite_email", required: true });
    const role = h("select", { name: "invite_role" }, ROLES.map((r) => h("option", { value: r, selected: r === "support" }, r)));
    parts.push(h("form", { class: "card", "aria-label": "Invite" }, h("h2", {}, "Invite a member"), field("E-mail", email), field("Role", role),
      action("Send invite", async () => {
        if (!(await confirmAction(`Invite ${email.value} as ${role.value}? The link is mailed and works once, for 72 hours.`))) return;
        const r = await api("POST", "/auth/v1/admin/invites", { email: email.value, role: role.value });
        notifyNext(`Invite mailed to ${r.email}.`, "ok");
        reload();
      }, { class: "primary" })));
    const require = h("input", { type: "checkbox", name: "requires_totp", checked: t.requires_totp });
    parts.push(h("form", { class: "card", "aria-label": "Second factor" }, h("h2", {}, "Second factor"),
      h("div", { class: "field inline" }, require, h("label", { for: "requires-totp" }, "Every member signs in with an authenticator")),
      action("Save", async () => {
        if (!(await confirmAction(require.checked ? "Require an authenticator for every member?" : "Stop requiring an authenticator?"))) return;
        await api("PUT", "/auth/v1/admin/console-settings", { requires_totp: require.checked });
        notify("Saved.", "ok");
      })));
    require.id = "requires-totp";
  } else {
    parts.push(h("p", {}, `Your role is ${me.role}: only owners change the team.`));
  }
  return page("Team", ...parts);
}

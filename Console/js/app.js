// The console's shell: the navigation, the hash router, sign-in and the invite.
import { acceptInvite, currentSession, forgotPassword, may, previewInvite, refresh, resetPassword, signIn, signOut } from "./api.js";
import { action, fail, field, flushNotice, h, notify, notifyNext, page } from "./ui.js";
import users from "./pages/users.js";
import team from "./pages/team.js";
import audit from "./pages/audit.js";
import campaigns from "./pages/campaigns.js";
import webhooks from "./pages/webhooks.js";
import push from "./pages/push.js";
import subscriptions from "./pages/subscriptions.js";
import catalogue from "./pages/catalogue.js";
import revenue from "./pages/revenue.js";

const PAGES = [
  ["users", "Users", users], ["subscriptions", "Subscriptions", subscriptions], ["campaigns", "Campaigns", campaigns],
  ["revenue", "Ads revenue", revenue], ["push", "Push", push], ["webhooks", "Webhooks", webhooks],
  ["catalogue", "Catalogue", catalogue], ["team", "Team", team], ["audit", "Audit", audit],
];

function nav(current) {
  const me = currentSession().member;
  return h("nav", { "aria-label": "Console" },
    h("ul", {}, PAGES.map(([id, label]) =>
      h("li", {}, h("a", { href: "#/" + id, "aria-current": id === current ? "page" : null }, label)))),
    h("p", { class: "who" }, `${me.email} · ${me.role}`, " ",
      action("Sign out", async () => { await signOut(); location.hash = "#/sign-in"; }, { class: "link" })));
}

function signInPage() {
  const app = h("input", { name: "app_id", required: true, autocomplete: "off", value: currentSession().appId });
  const email = h("input", { name: "email", type: "email", required: true, autocomplete: "username" });
  const password = h("input", { name: "password", type: "password", required: true, autocomplete: "current-password" });
  const code = h("input", { name: "totp_code", inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}" });
  const form = h("form", { class: "card" },
    field("App id", app), field("E-mail", email), field("Password", password),
    field("Authenticator code (if you enrolled one)", code),
    h("button", { type: "submit", class: "primary" }, "Sign in"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await signIn(app.value.trim(), email.value.trim(), password.value, code.value.trim());
      location.hash = "#/users";
    } catch (e) { fail(e); }
  });
  return page("Sign in to the console", form, h("p", {}, h("a", { href: "#/forgot" }, "Forgot your password?")));
}

function forgotPage() {
  const app = h("input", { name: "app_id", required: true, autocomplete: "off", value: currentSession().appId });
  const email = h("input", { name: "email", type: "email", required: true, autocomplete: "username" });
  const form = h("form", { class: "card" }, field("App id", app), field("E-mail", email), h("button", { type: "submit", class: "primary" }, "Mail me a link"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await forgotPassword(app.value.trim(), email.value.trim());
      notify("If this address is on the team, a link is on its way (valid one hour).", "ok");
    } catch (e) { fail(e); }
  });
  return page("Reset your password", form);
}

function resetPage(token) {
  const password = h("input", { name: "new_password", type: "password", required: true, autocomplete: "new-password", minlength: "8" });
  const form = h("form", { class: "card" }, field("New password", password), h("button", { type: "submit", class: "primary" }, "Set the new password"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await resetPassword(token, password.value);
      notifyNext("Your password is changed and your other sessions are ended: sign in.", "ok");
      location.hash = "#/sign-in";
    } catch (e) { fail(e); }
  });
  return page("Choose a new password", form);
}

async function invitePage(token) {
  const invite = await previewInvite(token);
  const password = h("input", { name: "password", type: "password", required: true, autocomplete: "new-password", minlength: "8" });
  const enrol = h("input", { name: "enrol", type: "checkbox", checked: invite.totp_required, disabled: invite.totp_required });
  const code = h("input", { name: "totp_code", inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}" });
  const form = h("form", { class: "card" },
    h("p", {}, `${invite.app_name} invites ${invite.email} as ${invite.role}. The link works once, until ${new Date(invite.expires_at).toUTCString()}.`),
    field("Choose a password", password),
    h("div", { class: "field inline" }, enrol, h("label", { for: "" }, invite.totp_required ? "This app requires an authenticator" : "Enrol an authenticator (recommended)")),
    h("p", {}, "Add this secret to your authenticator app, then type its current code: ", h("code", { class: "secret" }, invite.totp_secret)),
    h("p", {}, h("a", { href: invite.totp_uri }, "Open in an authenticator on this device")),
    field("Authenticator code", code),
    h("button", { type: "submit", class: "primary" }, "Join the team"));
  enrol.id = "enrol"; form.querySelector("label[for='']").setAttribute("for", "enrol");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { token, password: password.value };
    if (enrol.checked) { body.totp_secret = invite.totp_secret; body.totp_code = code.value.trim(); }
    try {
      await acceptInvite(body);
      currentSession().appId = invite.app_id;
      localStorage.setItem("console.app_id", invite.app_id);
      notifyNext("Welcome to the team: sign in with your new password.", "ok");
      location.hash = "#/sign-in";
    } catch (e) { fail(e); }
  });
  return page(`Join ${invite.app_name}'s console`, form);
}

async function route() {
  const main = document.getElementById("main");
  const [, name = "users", ...rest] = location.hash.replace(/^#/, "").split("/");
  const navBox = document.getElementById("nav");
  try {
    let view;
    if (name === "invite") {
      navBox.replaceChildren();
      view = await invitePage(rest.join("/"));
    } else if (name === "sign-in" || name === "forgot" || name === "reset") {
      navBox.replaceChildren();
      view = name === "sign-in" ? signInPage() : name === "forgot" ? forgotPage() : resetPage(rest.join("/"));
    } else {
      if (!currentSession().token) {
        try { await refresh(); } catch { location.hash = "#/sign-in"; return; }
      }
      const found = PAGES.find(([id]) => id === name) || PAGES[0];
      navBox.replaceChildren(nav(found[0]));
      view = await found[2](rest, { may });
    }
    main.replaceChildren(view);
    main.querySelector("h1")?.focus();
  } catch (e) {
    fail(e);
  }
}

window.addEventListener("hashchange", () => { flushNotice(); route(); });
route();

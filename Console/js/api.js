// The console is a client of the documented admin API, nothing more: every call goes through
// the gateway with the app's id and the member's short access token. The token lives in this
// module's memory only; the refresh cookie (HttpOnly, SameSite=Strict, path = the refresh
// route) brings a new one after a reload or when it runs out.

const session = { appId: localStorage.getItem("console.app_id") || "", token: null, member: null };

export function currentSession() { return session; }

export class ApiError extends Error {
  constructor(status, envelope) {
    super(envelope && envelope.message ? envelope.message : `The server answered ${status}`);
    this.status = status;
    this.code = envelope && envelope.error ? envelope.error : "http_" + status;
    this.requestId = envelope && envelope.request_id;
  }
}

async function parse(response) {
  const type = response.headers.get("Content-Type") || "";
  if (response.status === 204) return null;
  if (type.includes("application/json")) return response.json();
  return response.text();
}

async function raw(method, path, { body, headers = {}, auth = true } = {}) {
  const h = { "X-App-Id": session.appId, ...headers };
  if (body !== undefined) h["Content-Type"] = "application/json";
  if (auth && session.token) h["Authorization"] = "Bearer " + session.token;
  const response = await fetch(path, {
    method, headers: h, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin", cache: "no-store",
  });
  const data = await parse(response);
  if (!response.ok) throw new ApiError(response.status, typeof data === "object" ? data : null);
  return data;
}

function remember(answer) {
  session.token = answer.access_token;
  session.member = answer.member;
  // The page refreshes a minute before the ten minutes run out.
  clearTimeout(session.timer);
  session.timer = setTimeout(() => refresh().catch(() => {}), Math.max(30, answer.expires_in - 60) * 1000);
  return answer.member;
}

export async function signIn(appId, email, password, totpCode) {
  session.appId = appId;
  localStorage.setItem("console.app_id", appId);
  const body = { email, password };
  if (totpCode) body.totp_code = totpCode;
  return remember(await raw("POST", "/auth/v1/console/sign-in", { body, auth: false }));
}

export async function refresh() {
  if (!session.appId) throw new ApiError(401, { error: "invalid_token", message: "Sign in" });
  return remember(await raw("POST", "/auth/v1/console/refresh", { headers: { "X-Console-Request": "1" }, auth: false }));
}

export async function signOut() {
  try {
    // Through api(): a token that ran out while the tab slept is refreshed first (an expired
    // one would end its session too, but the cookie would still be live on this device).
    if (session.token) await api("POST", "/auth/v1/console/logout", undefined, { "X-Console-Request": "1" });
  } finally {
    clearTimeout(session.timer);
    session.token = null;
    session.member = null;
  }
}

export function forgotPassword(appId, email) {
  session.appId = appId;
  localStorage.setItem("console.app_id", appId);
  return raw("POST", "/auth/v1/console/password/forgot", { body: { email }, auth: false });
}
export function resetPassword(token, password) { return raw("POST", "/auth/v1/console/password/reset", { body: { token, password }, auth: false }); }
export function previewInvite(token) { return raw("POST", "/auth/v1/console/invites/preview", { body: { token }, auth: false }); }
export function acceptInvite(body) { return raw("POST", "/auth/v1/console/invites/accept", { body, auth: false }); }

/// An admin call. An expired token is refreshed once, then the call is made again.
export async function api(method, path, body, headers) {
  try {
    return await raw(method, path, { body, headers });
  } catch (e) {
    if (e.status !== 401 || !session.token) throw e;
    await refresh();
    return raw(method, path, { body, headers });
  }
}

/// Roles in order; a page asks whether the member's role reaches the one an action needs.
const ROLES = ["viewer", "support", "admin", "owner"];
export function may(role) {
  return session.member && ROLES.indexOf(session.member.role) >= ROLES.indexOf(role);
}

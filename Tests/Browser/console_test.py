"""#47 the operator console in a real browser: Debian's chromium, driven by Selenium through
Debian's chromium-driver, against the running stack through the gateway. Run by `make test`
(deploy/local/stack.sh) after the XCTest suite.

What a person does, as they do it: an owner invited by the platform joins with an authenticator
and invites a support member from the Team page; the invite is read from the stack's mailbox;
the support member joins, signs in with their code, finds a player by e-mail, grants 5 credits
with a reason, and sees the balance and the timeline change; the audit shows that member. A
viewer sees no action and a POST forged with the viewer's token is 403 at the service. A
campaign with two variants is created in the page and its results show the API's numbers.
Every page gets axe-core (0 serious or critical violations) and a screenshot under
.data/console-screens/; one page is driven with the keyboard alone.
"""
import base64
import email
import email.policy
import glob
import hashlib
import hmac
import json
import os
import struct
import sys
import time
import uuid

import axe_playwright_python
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "local"))
from stackcall import call  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = ROOT + "/.data"
GATEWAY = os.environ.get("TEST_GATEWAY_URL", "http://127.0.0.1:8080")
SCREENS = DATA + "/console-screens"
PASSWORD = "Atlas-of-Capitals-1987"
env = dict(line.strip().split("=", 1) for line in open(DATA + "/demo.env") if "=" in line)
APP = env["APP_ID"]
PLATFORM = {"X-App-ID": APP, "Authorization": "Bearer local-admin-token"}
failures = []
# axe-core 4.x as PyPI's axe-playwright-python carries it (used here with Selenium: the script only).
AXE = open(os.path.join(os.path.dirname(axe_playwright_python.__file__), "axe.min.js")).read()


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def totp(secret_b32, at=None):
    """RFC 6238 (SHA-1, 30 s, 6 digits), as an authenticator app computes it."""
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    digest = hmac.new(key, struct.pack(">Q", int((at or time.time()) // 30)), hashlib.sha1).digest()
    o = digest[-1] & 15
    return "%06d" % ((struct.unpack(">I", digest[o:o + 4])[0] & 0x7FFFFFFF) % 1_000_000)


def reset_link(address):
    return invite_link(address, marker="/console/#/reset/")


def invite_link(address, timeout=20, marker="/console/#/invite/"):
    """The link of the last mail to `address` holding `marker`, from the stack's mailbox (.data/mail)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in sorted(glob.glob(DATA + "/mail/*.eml"), key=os.path.getmtime, reverse=True):
            msg = email.message_from_binary_file(open(path, "rb"), policy=email.policy.default)
            if address not in str(msg["To"]):
                continue
            text = msg.get_body(("plain",)).get_content()
            for word in text.split():
                if marker in word:
                    return word
        time.sleep(0.3)
    raise AssertionError("no invite mailed to " + address)


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000", "--disable-gpu"):
        options.add_argument(a)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


class webhook_receiver:
    """deploy/local/webhook_receiver.py: the app's server, verifying our signatures with the
    standardwebhooks package; it refuses the first call of each event with 503."""
    def __init__(self):
        import socket
        import subprocess
        import tempfile
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.dir = tempfile.mkdtemp(prefix="console-hooks-")
        self.proc = subprocess.Popen([sys.executable, ROOT + "/deploy/local/webhook_receiver.py", "--port", str(self.port),
                                      "--secrets", self.dir + "/secrets", "--out", self.dir + "/received.jsonl", "--fail-first", "1"])
        time.sleep(0.5)

    def secret(self, value):
        open(self.dir + "/secrets", "w").write(value)

    def received(self):
        """What the server got, one JSON line per call (status answered, secrets that verified it)."""
        try:
            return [json.loads(line) for line in open(self.dir + "/received.jsonl") if line.strip()]
        except FileNotFoundError:
            return []

    def stop(self):
        self.proc.kill()


class Console:
    def __init__(self, name):
        self.name = name
        self.d = browser()
        self.wait = WebDriverWait(self.d, 15)

    def go(self, hash_):
        self.d.get(GATEWAY + "/console/#/" + hash_)

    def heading(self, text):
        try:
            self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "main h1"), text))
        except Exception:
            raise AssertionError("%s: no page titled %r; the page says %r, the notice %r" % (
                self.name, text, self.d.find_element(By.TAG_NAME, "main").text[:300], self.d.find_element(By.ID, "notice").text))

    def field(self, name):
        return self.wait.until(EC.presence_of_element_located((By.NAME, name)))

    def button(self, label):
        return self.wait.until(EC.element_to_be_clickable((By.XPATH, "//button[normalize-space()='%s']" % label)))

    def shows(self, element_id, text):
        try:
            self.wait.until(EC.text_to_be_present_in_element((By.ID, element_id), text))
        except Exception:
            raise AssertionError("%s: #%s does not show %r; it says %r, the notice %r" % (
                self.name, element_id, text, self.d.find_element(By.ID, element_id).text[:300], self.d.find_element(By.ID, "notice").text))

    def reload_until(self, text, seconds=30):
        """The page's Reload until its table shows `text` (a delivery's answer comes in the background)."""
        deadline = time.time() + seconds
        while text not in self.d.find_element(By.TAG_NAME, "table").text and time.time() < deadline:
            time.sleep(0.5)
            old = self.d.find_element(By.TAG_NAME, "table")
            self.button("Reload").click()
            self.wait.until(EC.staleness_of(old))

    def confirm(self):
        self.wait.until(EC.element_to_be_clickable((By.XPATH, "//dialog//button[normalize-space()='Confirm']"))).click()

    def notice(self, text):
        try:
            self.wait.until(EC.text_to_be_present_in_element((By.ID, "notice"), text))
        except Exception:
            raise AssertionError("%s: the notice says %r, not %r" % (self.name, self.d.find_element(By.ID, "notice").text, text))

    def audit(self, page):
        """axe-core on the page as shown: no serious or critical violation; its screenshot kept."""
        os.makedirs(SCREENS, exist_ok=True)
        self.d.save_screenshot("%s/%s-%s.png" % (SCREENS, self.name, page))
        self.d.execute_script(AXE)
        report = self.d.execute_async_script("axe.run(document).then(arguments[arguments.length - 1])")
        found = [v for v in report["violations"] if v.get("impact") in ("serious", "critical")]
        check(not found, "%s %s: axe finds no serious or critical violation %s" % (self.name, page, [(v["id"], v["nodes"][0]["target"]) for v in found]))
        errors = [e for e in self.d.get_log("browser") if e["level"] == "SEVERE" and "Content Security Policy" in e["message"]]
        check(not errors, "%s %s: nothing refused by the CSP %s" % (self.name, page, errors[:2]))

    def join(self, link, with_totp=True):
        """The invitee opens the mailed link, chooses a password, enrols an authenticator."""
        self.d.get(link.replace("http://127.0.0.1:8080", GATEWAY))
        self.heading("Join")
        secret = self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "code.secret"))).text
        self.field("password").send_keys(PASSWORD)
        enrol = self.field("enrol")
        if with_totp and not enrol.is_selected():
            enrol.click()
        self.audit("invite")
        # The previous step's code (an authenticator's clock may lag by one), typed just before
        # the submit: the sign-in that follows has a code of its own (a code works once).
        if with_totp:
            self.field("totp_code").send_keys(totp(secret, time.time() - 30))
        self.button("Join the team").click()
        self.heading("Sign in")
        return secret if with_totp else None

    def sign_in(self, address, secret, password=PASSWORD, ahead=0):
        self.heading("Sign in")
        app = self.field("app_id")
        check(app.get_attribute("value") == APP, "%s: the invite's app is filled in on the sign-in page" % self.name)
        self.field("email").send_keys(address)
        self.field("password").send_keys(password)
        self.audit("sign-in")
        if secret:
            self.field("totp_code").send_keys(totp(secret, time.time() + ahead))
        self.button("Sign in").click()
        self.heading("Users")

    def close(self):
        self.d.quit()


def api(method, path, headers, body=None):
    return call(method, GATEWAY + path, headers, body)


def player(tag, provider="email"):
    """A player signed up as the app does it, straight to auth as its own client address (sign-ups
    are limited per address): (id, e-mail, headers)."""
    address = "%s-%s@example.com" % (tag, uuid.uuid4().hex[:10])
    credentials = {"email": address, "password": "Tr1cky-Geography-42!"} if provider == "email" else {"device_id": "console-" + uuid.uuid4().hex}
    status, reg = call("POST", "http://127.0.0.1:%s/auth/v1/auth/register" % os.environ.get("AUTH_PORT", "3001"),
                       {"X-App-ID": APP, "X-API-Key": env["API_KEY"], "X-Forwarded-For": "10.79.%d.%d" % (uuid.uuid4().int % 250, uuid.uuid4().int % 250 + 1)},
                       {"provider": provider, "credentials": credentials})
    assert status == 201, (status, reg)
    player.refresh = reg["tokens"]["refresh_token"]
    return reg["user"]["id"], address, {"X-App-ID": APP, "X-API-Key": env["API_KEY"], "Authorization": "Bearer " + reg["tokens"]["access_token"]}


def main():
    ts = uuid.uuid4().hex[:8]
    player_id, player_email, _ = player("player")
    player_refresh = player.refresh

    # The first owner is invited by the platform's token (the API), then joins in the browser.
    owner_email = "owner-%s@team.example" % ts
    status, body = api("POST", "/auth/v1/admin/invites", PLATFORM, {"email": owner_email, "role": "owner"})
    assert status == 201, (status, body)
    owner = Console("owner")
    support = Console("support")
    viewer = Console("viewer")
    try:
        owner_secret = owner.join(invite_link(owner_email))
        owner.sign_in(owner_email, owner_secret)

        # The owner invites a support member from the Team page.
        owner.go("team")
        owner.heading("Team")
        support_email = "support-%s@team.example" % ts
        owner.field("invite_email").send_keys(support_email)
        owner.d.find_element(By.NAME, "invite_role").send_keys("support")
        owner.button("Send invite").click()
        owner.confirm()
        owner.notice("Invite mailed to " + support_email)
        owner.wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), support_email))
        owner.audit("team")

        # The support member joins with an authenticator and signs in with its code.
        support_secret = support.join(invite_link(support_email))
        support.sign_in(support_email, support_secret)

        # Finds the player by e-mail, grants 5 credits with a reason.
        support.field("q").send_keys(player_email + Keys.ENTER)
        support.shows("user", player_id)
        before = int(support.d.find_element(By.CSS_SELECTOR, "[data-balance]").get_attribute("data-balance"))
        support.field("amount").send_keys("5")
        support.field("reason").send_keys("ticket 4711: lost quiz credits")
        support.button("Grant credits").click()
        support.confirm()
        support.notice("the balance is now %d" % (before + 5))
        support.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "[data-balance]"), "%d credits" % (before + 5)))
        support.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, ".timeline"), "+5 (balance %d)" % (before + 5)))
        check(True, "support: the balance and the timeline show the 5 credits")
        status, credits = api("GET", "/subscription/v1/admin/users/%s/credits" % player_id, PLATFORM)
        check(status == 200 and credits["balance"] == before + 5, "the API agrees: balance %s" % credits.get("balance"))
        support.audit("users")

        # Signs the player out everywhere from the same page: their refresh token stops working.
        support.field("account_reason").send_keys("ticket 4711: stolen phone")
        support.button("Sign out everywhere").click()
        support.confirm()
        support.notice("session(s) ended")
        status, _ = call("POST", GATEWAY + "/auth/v1/auth/refresh", {"X-App-ID": APP, "X-API-Key": env["API_KEY"]},
                         {"refresh_token": player_refresh})
        check(status == 401, "support: the player's refresh token is refused after 'Sign out everywhere' (%s)" % status)

        # The audit names the member on subscription's side.
        support.go("audit")
        support.heading("Audit")
        support.d.find_element(By.NAME, "service").send_keys("subscription")
        support.button("Show").click()
        # The page opens on auth's audit, which holds member rows too (the sign-out): wait for
        # the grant's own row, or a read of auth's table fails the check below.
        grant = "POST /subscription/v1/admin/users/%s/credits" % player_id
        try:
            support.wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "table"), grant))
        except TimeoutException:
            pass
        rows = support.d.find_element(By.TAG_NAME, "table").text
        check(support_email in rows and grant in rows,
              "audit: subscription names the support member for the grant")
        support.audit("audit")

        # A viewer: no action on the Users page; a forged POST with the viewer's token is 403.
        status, body = api("POST", "/auth/v1/admin/invites", PLATFORM, {"email": "viewer-%s@team.example" % ts, "role": "viewer"})
        assert status == 201, body
        # The viewer joins without an authenticator (and adds one below, from the Team page).
        viewer_secret = viewer.join(invite_link("viewer-%s@team.example" % ts), with_totp=False)
        viewer.sign_in("viewer-%s@team.example" % ts, viewer_secret)
        viewer.field("q").send_keys(player_email + Keys.ENTER)
        viewer.shows("user", player_id)
        check(not viewer.d.find_elements(By.XPATH, "//button[normalize-space()='Grant credits']"), "viewer: no Grant credits button")
        token = viewer.d.execute_script("return (await import('/console/js/api.js')).currentSession().token")
        status, body = api("POST", "/subscription/v1/admin/users/%s/credits" % player_id,
                           {"X-App-ID": APP, "Authorization": "Bearer " + token, "Idempotency-Key": str(uuid.uuid4())},
                           {"amount": 5, "reason": "forged"})
        check(status == 403 and body.get("error") == "insufficient_role", "viewer: a forged grant is 403 at the service (%s %s)" % (status, body.get("error")))
        status, after = api("GET", "/subscription/v1/admin/users/%s/credits" % player_id, PLATFORM)
        check(after["balance"] == before + 5, "viewer: the forged grant changed nothing")
        viewer.audit("users")

        # The viewer adds an authenticator after joining; sign-ins then ask for its code.
        viewer.go("team")
        viewer.heading("Team")
        viewer.button("Set up an authenticator").click()
        viewer_secret = viewer.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#main code.secret"))).text
        viewer.field("my_totp_code").send_keys(totp(viewer_secret))
        viewer.button("Confirm the authenticator").click()
        viewer.notice("Your authenticator is set up")
        status, body = api("POST", "/auth/v1/console/sign-in", {"X-App-ID": APP}, {"email": "viewer-%s@team.example" % ts, "password": PASSWORD})
        check(status == 401 and body.get("error") == "totp_required", "viewer: after the enrolment a sign-in asks for the code (%s %s)" % (status, body.get("error")))
        viewer.audit("team")

        # A campaign with two variants, created in the page; its results show the API's numbers.
        owner.go("campaigns")
        owner.heading("Campaigns")
        name = "Console A/B %s" % ts
        owner.field("name").send_keys(name)
        owner.button("Create campaign").click()
        owner.confirm()
        owner.heading(name)
        cid = owner.d.current_url.rsplit("/", 1)[1]
        # Players are shown it (a listing exposes each to their variant), then the page is read again.
        for _ in range(6):
            status, listed = api("GET", "/ads/v1/campaigns/active", player("exposed", provider="guest")[2])
            assert status == 200, listed
        owner.d.refresh()
        owner.heading(name)
        status, results = api("GET", "/ads/v1/admin/campaigns/%s/results" % cid, PLATFORM)
        assert status == 200, results
        shown = owner.d.find_element(By.XPATH, "//table[caption='Results by variant']").text
        for v in results["variants"]:
            check("%s %s %s %s %s" % (v["key"], v["weight"], v["assigned"], v["exposed"], v["completed"]) in shown,
                  "campaign: variant %s shows the API's weight and counts" % v["key"])
        check(sum(v["exposed"] for v in results["variants"]) == 6, "campaign: the six players were exposed (%s)" % [v["exposed"] for v in results["variants"]])
        check(len(owner.d.find_elements(By.CSS_SELECTOR, "svg.chart")) >= 1, "campaign: the results are drawn")
        owner.audit("campaign")

        # A webhook delivery the app's server refused is replayed from the console and delivered.
        hooks = webhook_receiver()
        endpoint = None
        try:
            status, made = api("POST", "/auth/v1/admin/webhooks", PLATFORM, {"url": "http://127.0.0.1:%d/hook" % hooks.port, "events": ["user.created"],
                                                                            "description": "console replay"})
            assert status == 201, made
            hooks.secret(made["secret"])
            endpoint = made["endpoint"]["id"]
            player("hooked")
            owner.go("webhooks/" + endpoint)
            owner.heading("Webhook")
            owner.reload_until("503")
            check("503" in owner.d.find_element(By.TAG_NAME, "table").text, "webhooks: the refused attempt shows its 503")
            owner.audit("webhook")
            owner.button("Replay").click()
            owner.confirm()
            owner.notice("Queued again")
            owner.reload_until("delivered")
            row = owner.d.find_element(By.XPATH, "//table/tbody/tr[1]").text
            check("delivered" in row and "200" in row, "webhooks: replayed from the console, the delivery shows delivered with 200 (%r)" % row)
            check(made["secret"] not in owner.d.page_source, "webhooks: the secret is not in the page after it was set")
            calls = hooks.received()
            check([c["status"] for c in calls] == [503, 200] and calls[-1]["verified_by"] == [0],
                  "webhooks: the app's server verified our signature on the replayed call (standardwebhooks): %s" % [(c["status"], c["verified_by"]) for c in calls])
        finally:
            if endpoint:
                api("DELETE", "/auth/v1/admin/webhooks/" + endpoint, PLATFORM)
            hooks.stop()

        # A push test send shows the stand-in's answer for the player's device.
        pushed_id, _, pushed = player("pushed")
        status, _ = api("PATCH", "/auth/v1/auth/privacy", pushed, {"consent_notifications": True})
        assert status == 200
        status, _ = api("PUT", "/auth/v1/auth/push-tokens", pushed, {"device_id": "iphone-console", "platform": "ios",
                                                                     "token": uuid.uuid4().hex + uuid.uuid4().hex, "environment": "sandbox", "locale": "en"})
        assert status == 200
        owner.go("push")
        owner.heading("Push")
        owner.field("user_id").send_keys(pushed_id)
        owner.button("Send a test push").click()
        owner.confirm()
        owner.wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "main"), "each device's answer"))
        answer = owner.d.find_element(By.XPATH, "//table[contains(caption, \"each device's answer\")]").text
        check("iphone-console" in answer and "apns" in answer and "200" in answer, "push: the test send shows the provider's answer (%r)" % answer)
        owner.audit("push")
        # The settings are changed from the form (the whole object: the templates come back as
        # they were), and the send is among the recent sends.
        status, before = api("GET", "/auth/v1/admin/push", PLATFORM)
        limit = owner.field("daily_limit")
        limit.clear()
        limit.send_keys("7")
        owner.button("Save settings").click()
        owner.confirm()
        owner.notice("at most 7 a day")
        status, after = api("GET", "/auth/v1/admin/push", PLATFORM)
        check(status == 200 and after["settings"]["daily_limit"] == 7 and after["settings"]["templates"] == before["settings"]["templates"],
              "push: the settings form saved the daily limit and kept the templates (%r)" % after.get("settings"))
        owner.go("users")
        owner.heading("Users")
        owner.go("push")
        owner.wait.until(EC.presence_of_element_located((By.XPATH, "//table[contains(caption, 'Recent sends')]")))
        sends = owner.d.find_element(By.XPATH, "//table[contains(caption, 'Recent sends')]").text
        check("iphone-console" in sends and "sent" in sends and pushed_id in sends, "push: the test send is among the recent sends (%r)" % sends[:300])

        # Catalogue: the app's categories, with their items.
        category = "console-%s" % ts
        status, _ = api("PUT", "/offline/v1/admin/categories/" + category, PLATFORM, {"name": "Capitals of Europe"})
        assert status == 200, status
        status, _ = api("POST", "/offline/v1/admin/categories/%s/items" % category, PLATFORM,
                        {"upsert": [{"id": "paris", "data": {"q": "Capital of France?", "a": "Paris"}}, {"id": "rome", "data": {"q": "Capital of Italy?", "a": "Rome"}}]})
        assert status == 200, status
        owner.go("catalogue")
        owner.heading("Catalogue")
        owner.wait.until(EC.presence_of_element_located((By.XPATH, "//table[contains(caption, 'Categories')]")))
        rows = [r.text for r in owner.d.find_elements(By.XPATH, "//table[contains(caption, 'Categories')]//tr") if category in r.text]
        check(len(rows) == 1 and "Capitals of Europe" in rows[0] and " 2 " in " %s " % rows[0], "catalogue: the category is listed with its 2 items (%r)" % rows)

        # Subscriptions: the plans the app sells and its recent store events.
        owner.go("subscriptions")
        owner.heading("Subscriptions")
        owner.wait.until(EC.presence_of_element_located((By.XPATH, "//table[contains(caption, 'Recent store events')]")))
        plans = owner.d.find_element(By.XPATH, "//table[contains(caption, 'Plans')]").text
        check("monthly" in plans and "annual" in plans, "subscriptions: the demo app's plans are listed (%r)" % plans[:200])

        # Every other page opens, passes axe, and is screenshotted.
        for page, title in (("subscriptions", "Subscriptions"), ("revenue", "Ads revenue"), ("webhooks", "Webhooks"), ("catalogue", "Catalogue"), ("audit", "Audit"), ("users", "Users")):
            owner.go(page)
            owner.heading(title)
            owner.audit(page)

        # The keyboard alone: Tab reaches the navigation and Enter follows a link.
        owner.go("users")
        owner.heading("Users")
        body = owner.d.find_element(By.TAG_NAME, "body")
        body.click()
        reached = None
        for _ in range(30):
            active = owner.d.switch_to.active_element
            active.send_keys(Keys.TAB)
            active = owner.d.switch_to.active_element
            if active.tag_name == "a" and active.text == "Team":
                reached = active
                break
        check(reached is not None, "keyboard: Tab reaches the Team link")
        if reached:
            reached.send_keys(Keys.ENTER)
            owner.heading("Team")
            check(True, "keyboard: Enter opens the Team page")

        # The viewer forgot their password: the sign-in page's link, the mail, a new password.
        viewer.button("Sign out").click()
        viewer.heading("Sign in")
        viewer.d.find_element(By.LINK_TEXT, "Forgot your password?").click()
        viewer.heading("Reset your password")
        viewer.field("email").send_keys("viewer-%s@team.example" % ts)
        viewer.button("Mail me a link").click()
        viewer.notice("a link is on its way")
        viewer.audit("forgot")
        viewer.d.get(reset_link("viewer-%s@team.example" % ts).replace("http://127.0.0.1:8080", GATEWAY))
        viewer.heading("Choose a new password")
        viewer.field("new_password").send_keys("Meridian-of-Greenwich-1884")
        viewer.audit("reset")
        viewer.button("Set the new password").click()
        viewer.notice("Your password is changed")
        # The next step's code: the sign-in before spent this one.
        viewer.sign_in("viewer-%s@team.example" % ts, viewer_secret, password="Meridian-of-Greenwich-1884", ahead=30)
        check(True, "viewer: a forgotten password is reset from the mailed link and the new one signs in")

        # Sign out ends the session: a reload asks to sign in again.
        support.button("Sign out").click()
        support.heading("Sign in")
        support.go("users")
        support.heading("Sign in")
        check(True, "support: signed out, the console asks to sign in again")
    finally:
        for c in (owner, support, viewer):
            c.close()
    if failures:
        print("console: %d failed" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("console: every check passed; screenshots in " + SCREENS)


if __name__ == "__main__":
    main()

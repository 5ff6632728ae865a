"""Writes each service's OpenAPI 3.1 document (Services/<Name>/Sources/OpenAPI/openapi.json).
Run from anywhere: python3 deploy/local/openapi_gen.py. The documents are committed; edit here."""
import json, sys
from error_codes import codes as error_codes

def err(desc): return {"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
ERROR_EXAMPLE = {"error": "invalid_request", "message": "credentials.email is required", "field": "credentials.email", "request_id": "9f1c2b7e4d"}
ERRS = {"400": "Malformed input (the field is named)", "401": "Missing or invalid tenant headers or token", "403": "Not allowed",
        "404": "Unknown resource", "409": "Conflicting state", "410": "Gone", "413": "Body too large", "415": "Content-Type must be application/json",
        "422": "Invalid value (the field is named)", "426": "This route is a WebSocket: send the Upgrade", "429": "Limit reached (retry_after)", "502": "Upstream refused", "503": "A dependency is unavailable",
        "507": "Not enough offline storage"}
def responses(ok, okdesc, extra, schema=None):
    # 204 answers no body.
    r = {ok: {"description": "No Content"}} if ok == "204" else {ok: {"description": okdesc, "content": {"application/json": {"schema": schema or {"type": "object"}}}}}
    with_headers(r)
    for c in ["400", "401", "403", "404", "413", "415", "422", "429", "503"] + extra:
        r[c] = {"$ref": f"#/components/responses/{ERROR_NAMES[c]}"}
    return r
# Each refusal is one shared response (so a generated client has one type per status, not one
# per operation and status).
ERROR_NAMES = {"400": "BadRequest", "401": "Unauthorized", "402": "PaymentRequired", "403": "Forbidden", "404": "NotFound",
               "409": "Conflict", "410": "Gone", "413": "ContentTooLarge", "415": "UnsupportedMediaType", "422": "UnprocessableContent", "426": "UpgradeRequired",
               "429": "TooManyRequests", "502": "BadGateway", "503": "ServiceUnavailable", "507": "InsufficientStorage"}
def error_responses():
    return {ERROR_NAMES[code]: answer for code, answer in with_headers({code: err(ERRS[code]) for code in ERROR_NAMES}).items()}
def with_headers(r):
    for code, answer in r.items():
        answer["headers"] = {"X-Request-ID": {"$ref": "#/components/headers/X-Request-ID"}}
        if code in ("429", "503"): answer["headers"]["Retry-After"] = {"$ref": "#/components/headers/Retry-After"}
    return r
def obj(props, required=()):
    return {"type": "object", "properties": props, "required": list(required)}
S = {"type": "string"}; I = {"type": "integer"}; B = {"type": "boolean"}; N = {"type": "number"}
def nullable(t): return {"type": [t["type"], "null"]} if "type" in t else t
def body(schema): return {"required": True, "content": {"application/json": {"schema": schema}}}
UUIDS = {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"}
ID = {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,100}$"}
def q(name, schema, required=False): return {"name": name, "in": "query", "required": required, "schema": schema}
def p(name, schema=ID): return {"name": name, "in": "path", "required": True, "schema": schema}

def document(title, prefix, paths, security_user=True, service=None):
    doc = {"openapi": "3.1.0", "info": {"title": title, "version": "1.0.0"},
           "servers": [{"url": "/"}],
           "components": {
               "securitySchemes": {
                   "appId": {"type": "apiKey", "in": "header", "name": "X-App-ID"},
                   "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                   "bearer": {"type": "http", "scheme": "bearer"}},
               "responses": error_responses(),
               "headers": {
                   "X-Request-ID": {"description": "The request's id (the client's own when it sent a plain token), in the logs of every service it reached",
                                    "schema": S},
                   "Retry-After": {"description": "Seconds to wait before trying again", "schema": I}},
               "schemas": {"Error": dict(obj({"error": {"type": "string", "enum": list(error_codes(service)),
                                                    "description": "The code an app switches on: docs/ERRORS.md lists each with its meaning"},
                                         "message": S, "request_id": S, "field": {"type": "string", "description": "The input field at fault, as a path (credentials.email, items[2].id)"},
                                         "retry_after": I, "reason": S},
                                        ["error", "message"]),
                                    additionalProperties={"description": "Some codes carry their context (balance, required_mb, max_devices, …)"},
                                    examples=[ERROR_EXAMPLE])}},
           "security": [{"appId": [], "apiKey": [], "bearer": []}],
           "paths": {}}
    for path, ops in paths.items():
        for method, o in ops.items():
            o.setdefault("operationId", operation_id(method, path))
        doc["paths"][prefix + path] = ops
    # The named schemas this document uses, and the ones they use.
    def refs(node):
        if isinstance(node, dict):
            r = node.get("$ref", "")
            if r.startswith("#/components/schemas/") and r.split("/")[-1] != "Error": yield r.split("/")[-1]
            for v in node.values(): yield from refs(v)
        elif isinstance(node, list):
            for v in node: yield from refs(v)
    todo = list(refs(doc["paths"]))
    while todo:
        name = todo.pop()
        if name in doc["components"]["schemas"]: continue
        doc["components"]["schemas"][name] = COMPONENTS[name]
        todo += list(refs(COMPONENTS[name]))
    # An example on every JSON body, built from its schema (a named schema's own example first),
    # so that it cannot disagree with the schema it illustrates.
    for ops in doc["paths"].values():
        for o in ops.values():
            medias = [o.get("requestBody", {}).get("content", {})] + [r.get("content", {}) for r in o["responses"].values()]
            for content in medias:
                for media_type, media in content.items():
                    if media_type == "application/json" and "example" not in media:
                        media["example"] = example_of(media["schema"], doc)
    for answer in doc["components"]["responses"].values():
        answer["content"]["application/json"]["example"] = ERROR_EXAMPLE
    ids = [o["operationId"] for ops in doc["paths"].values() for o in ops.values()]
    assert len(ids) == len(set(ids)), f"{title}: duplicate operationIds"
    return doc

EXAMPLE_STRINGS = {"date-time": "2026-11-26T19:50:14Z", "date": "2026-11-26", "uuid": "3b3d29c9-acaa-468a-ae72-350295f7c244"}
def example_of(schema, doc, depth=0):
    if "$ref" in schema:
        target = doc["components"]["schemas"].get(schema["$ref"].split("/")[-1]) or COMPONENTS[schema["$ref"].split("/")[-1]]
        return target["examples"][0] if target.get("examples") else example_of(target, doc, depth)
    if schema.get("examples"): return schema["examples"][0]
    if "const" in schema: return schema["const"]
    if "enum" in schema: return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list): kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        if depth > 4: return {}
        props = schema.get("properties", {})
        return {k: example_of(v, doc, depth + 1) for k, v in props.items() if k in schema.get("required", []) or depth == 0 or len(props) <= 6}
    if kind == "array": return [example_of(schema["items"], doc, depth + 1)] if "items" in schema else []
    if kind == "string": return EXAMPLE_STRINGS.get(schema.get("format"), "string")
    if kind == "integer": return max(schema.get("minimum", 1), 1)
    if kind == "number": return 1.5
    if kind == "boolean": return True
    return None

def operation_id(method, path):
    """lowerCamelCase from the method and the path (`get /campaigns/{id}` -> getCampaignsById),
    so that a generated client's methods read as names (#32)."""
    words = []
    for seg in path.strip("/").split("/"):
        if seg.startswith("{"):
            words.append("By" + seg.strip("{}").replace("_", " ").title().replace(" ", ""))
        else:
            words.append("".join(w[:1].upper() + w[1:] for w in seg.replace(".", "-").replace("_", "-").split("-") if w))
    return method.lower() + "".join(words)

def op(summary, ok="200", okdesc="OK", extra=(), params=(), req=None, schema=None, tags=()):
    o = {"summary": summary, "responses": responses(ok, okdesc, list(extra), schema)}
    if params: o["parameters"] = list(params)
    if req: o["requestBody"] = req
    return o


# Named component schemas (#32): what a generated client turns into types. `ref("X")` names
# one; each service's document carries the ones it uses. Objects stay open to new fields (an app
# already shipped keeps decoding when a field is added); the stack tests hold the answers to
# exactly these fields (Tests/StackTests/DocumentedHTTPClient.swift).
COMPONENTS = {}
def named(name, schema, example=None):
    if example is not None: schema = dict(schema, examples=[example])
    COMPONENTS[name] = schema
    return {"$ref": f"#/components/schemas/{name}"}
def ref(name): return {"$ref": f"#/components/schemas/{name}"}
def nullable_copy(name):
    """A named object or null. swift-openapi-generator 1.14 drops `anyOf: [$ref, null]` (it skips
    the null schema and the property with it), so the property carries the object's own schema
    with `type: [object, null]` and decodes to an optional."""
    return dict(COMPONENTS[name], type=["object", "null"])
DT = {"type": "string", "format": "date-time"}; DATE = {"type": "string", "format": "date"}
def arr(items): return {"type": "array", "items": items}
ANY = {"description": "Any JSON value, kept as given"}  # free-form JSON (what a game server answered)
PAYLOAD = {"type": "object", "description": "The app's own JSON object, kept as given", "additionalProperties": {}}
FREE = {"type": "object"}

# auth
named("PrivacySettings", obj({"consent_analytics": B, "consent_third_party": B, "consent_geolocation": B, "consent_personalized_ads": B,
    "consent_notifications": B, "consent_game_center": B, "updated_at": DT},
    ["consent_analytics", "consent_third_party", "consent_geolocation", "consent_personalized_ads", "consent_notifications", "consent_game_center"]))
named("User", obj({"id": UUIDS, "email": S, "email_verified": B, "provider": {"type": "string", "enum": ["email", "google", "apple", "guest"]},
    "status": {"type": "string", "enum": ["free", "premium", "suspended", "pending_deletion"]}, "is_guest": B, "display_name": S,
    "created_at": DT, "last_login": DT, "guest_expires_at": DT, "privacy_settings": ref("PrivacySettings"), "linked_providers": arr(S)},
    ["id", "email_verified", "provider", "status", "is_guest", "created_at"]),
    {"id": "3B3D29C9-ACAA-468A-AE72-350295F7C244", "email": "ada@example.com", "email_verified": True, "provider": "email", "status": "free",
     "is_guest": False, "created_at": "2026-11-26T19:50:14Z", "last_login": "2026-11-26T19:50:15Z"})
named("Tokens", obj({"access_token": S, "refresh_token": S, "expires_in": I, "token_type": {"type": "string", "const": "Bearer"}},
    ["access_token", "refresh_token", "expires_in", "token_type"]),
    {"access_token": "eyJhbGciOiJFZERTQSIs…", "refresh_token": "DaCirHjxoexsX--606RZS3…", "expires_in": 900, "token_type": "Bearer"})
named("Session", obj({"user": ref("User"), "tokens": ref("Tokens"),
    "guest_secret": {"type": "string", "description": "A guest's device secret, shown once at its creation: keep it to sign in again"}},
    ["tokens"]))
named("UserResponse", obj({"user": ref("User")}, ["user"]))
named("PrivacyResponse", obj({"privacy": ref("PrivacySettings"), "applied_immediately": B, "warnings": arr(obj({"setting": S,
    "impact": {"type": "string", "description": "What the change takes away (local_questions_unavailable, …)"}, "message": S}, ["setting", "impact", "message"]))},
    ["privacy"]))
named("PushDevice", obj({"device_id": S, "platform": {"type": "string", "enum": ["ios", "android"]}, "environment": {"type": "string", "enum": ["sandbox", "production"]},
    "locale": {"type": ["string", "null"]}, "token_suffix": S, "created_at": DT, "updated_at": DT}, ["device_id", "platform", "token_suffix"]))
named("DeletionScheduled", obj({"scheduled_deletion_date": DT, "cancellation_token": S, "message": S}, ["scheduled_deletion_date", "cancellation_token"]))
named("ExportStatus", obj({"export_id": UUIDS, "status": {"type": "string", "enum": ["pending", "processing", "ready", "failed", "expired"]},
    "requested_at": DT, "completed_at": DT, "expires_at": DT, "download_url": S, "estimated_time": S}, ["export_id", "status"]))

ACHIEVEMENTS = {"type": "array", "maxItems": 1000, "items": {"type": "string", "minLength": 1, "maxLength": 200}}
SCORE = {"type": "integer", "minimum": 0}
named("GameCenterLink", obj({"linked": B, "player_id": S, "alias": {"type": ["string", "null"]},
    "synced": obj({"achievements": dict(I, description="Achievements held after the merge"), "leaderboard_score": I}, ["achievements", "leaderboard_score"]),
    "conflicts": arr(obj({"type": S, "local": I, "game_center": I, "resolution": {"type": "string", "enum": ["game_center_wins", "local_reported"]}},
                         ["type", "local", "game_center", "resolution"])),
    "report_to_game_center": obj({"achievements": arr(S), "leaderboard_score": {"type": ["integer", "null"]}}, ["achievements"])},
    ["linked", "player_id", "synced", "conflicts", "report_to_game_center"]))
TEMPLATE = obj({"subject": S, "text": S}, ["subject", "text"])
named("EmailSettings", obj({"app_name": S, "mail_from": {"type": "string", "description": "Name <address>"}, "support_email": S, "link_base_url": S,
    "default_locale": {"type": "string", "enum": ["fr", "en"]},
    "templates": {"type": "object", "description": "Overrides by language (fr, en) then e-mail (verify_email, password_reset, otp_code, deletion_scheduled, export_ready, purchase_confirmation)",
                  "additionalProperties": {"type": "object", "additionalProperties": TEMPLATE}}},
    ["app_name", "mail_from", "support_email", "link_base_url"]))
named("SignInSettings", obj({"google_client_ids": arr(S), "apple_bundle_ids": arr(S),
    "apple": {"type": ["object", "null"], "properties": {"team_id": S, "key_id": S, "client_id": S, "version": I}, "required": ["team_id", "key_id", "client_id", "version"]}},
    ["google_client_ids", "apple_bundle_ids"]))
named("SupportUser", obj({"id": UUIDS, "email": S, "email_verified": B, "provider": S, "display_name": S, "status": S, "is_guest": B, "created_at": DT,
    "last_login": DT, "deletion_scheduled_at": DT, "sign_in_methods": arr(S), "live_sessions": I},
    ["id", "email_verified", "provider", "status", "is_guest", "created_at", "sign_in_methods", "live_sessions"]))
PUSH_TEMPLATE = obj({"title": S, "body": S}, ["title", "body"])
named("PushSettings", obj({"daily_limit": {"type": "integer", "minimum": 0, "maximum": 100}, "silent_without_consent": B, "require_opt_in": B,
    "default_locale": {"type": "string", "enum": ["fr", "en"]},
    "templates": {"type": "object", "description": "Wording by language (fr, en) then kind, over the built-in texts",
                  "additionalProperties": {"type": "object", "additionalProperties": PUSH_TEMPLATE}}}))
named("PushSetup", obj({"credentials": arr(obj({"provider": {"type": "string", "enum": ["apns", "fcm"]},
    "settings": obj({"team_id": S, "key_id": S, "topic": S, "environment": S, "project_id": S, "client_email": S}),
    "fingerprint": S, "version": I, "last_error": S, "last_error_at": DT, "updated_at": DT}, ["provider", "settings", "fingerprint", "version", "updated_at"])),
    "settings": ref("PushSettings")}, ["credentials", "settings"]))
named("PushSendResult", obj({"notification_id": I, "results": arr(obj({"notification_id": I, "kind": S, "device_id": S, "provider": S,
    "outcome": S, "status_code": I, "reason": S, "sent_at": DT}, ["notification_id", "kind", "outcome", "sent_at"]))}, ["notification_id", "results"]))
named("WebhookEndpoint", obj({"id": UUIDS, "url": S, "events": arr(S), "description": S, "disabled": B, "disabled_reason": S,
    "created_at": DT, "updated_at": DT, "previous_secret_expires_at": DT}, ["id", "url", "events", "description", "disabled", "created_at", "updated_at"]),
    {"id": "3b3d29c9-acaa-468a-ae72-350295f7c244", "url": "https://game.example.com/hooks", "events": ["subscription.refunded", "user.deleted"],
     "description": "game server", "disabled": False, "created_at": "2026-11-26T19:50:14Z", "updated_at": "2026-11-26T19:50:14Z"})
named("WebhookSecret", obj({"endpoint": ref("WebhookEndpoint"), "secret": {"type": "string", "pattern": "^whsec_", "description": "Shown once: verify our signatures with it (Standard Webhooks)"}},
    ["endpoint", "secret"]))
named("WebhookDelivery", obj({"id": I, "event_id": UUIDS, "event_type": S, "status": {"type": "string", "enum": ["pending", "sending", "delivered", "failed", "cancelled"]},
    "attempts": I, "answer_code": I, "last_error": S, "latency_ms": I, "next_attempt_at": DT, "created_at": DT, "delivered_at": DT,
    "history": arr(named("WebhookAttempt", obj({"attempt": I, "sent_at": DT,
        "answer_code": {"type": ["integer", "null"], "description": "The receiver's HTTP status; null when it could not be reached or did not answer in time"},
        "latency_ms": {"type": ["integer", "null"]}, "error": {"type": ["string", "null"], "description": "Why no answer was had (connection refused, timeout, …)"},
        "outcome": {"type": "string", "enum": ["delivered", "retry", "failed", "gone"]}}, ["attempt", "sent_at", "outcome"])))},
    ["id", "event_id", "event_type", "status", "attempts", "created_at", "history"]))

# subscription
FEATURES = named("PlanFeatures", {"type": "object", "description": "What a plan gives (seed 2.1); an operator may add keys of its own",
    "properties": {"unlimited_content": B, "no_ads": B, "offline_unlimited": B, "premium_categories": arr(S)},
    "additionalProperties": {"description": "A feature the app's operator defined"}})
named("Plan", obj({"id": UUIDS, "name": S, "plan_type": S, "apple_product_id": S, "google_product_id": S, "price": N, "currency": S,
    "trial_enabled": B, "trial_duration_days": I, "features": FEATURES, "discount_vs_monthly": S},
    ["id", "name", "plan_type", "price", "currency", "trial_enabled", "trial_duration_days", "features"]))
named("Subscription", obj({"id": UUIDS, "status": {"type": "string", "enum": ["trial", "active", "grace_period", "billing_retry", "cancelled", "expired", "revoked", "refunded", "paused"]},
    "plan_type": S, "start_date": DT, "trial_end_date": DT, "end_date": DT, "auto_renew": B, "grace_period_end": DT, "expired_at": DT,
    "features": FEATURES, "days_remaining": I, "billing_issue": B}, ["id", "status", "plan_type", "start_date", "end_date", "auto_renew"]),
    {"id": "9DFDF6BE-0154-45B3-8589-9499CC3F9C51", "status": "active", "plan_type": "monthly", "start_date": "2026-11-26T19:49:46Z",
     "end_date": "2026-12-26T19:49:46Z", "auto_renew": True})
named("SubscriptionStatus", obj({"subscription": nullable_copy("Subscription"), "is_premium": B, "features": FEATURES,
    "warning": S, "days_remaining": I}, ["is_premium", "features"]))
named("PurchaseResult", obj({"subscription": ref("Subscription"), "activated": B}, ["subscription", "activated"]))
named("CreditBalance", obj({"balance": I}, ["balance"]), {"balance": 6})
named("CreditTransaction", obj({"id": I, "amount": I, "source": S, "reference_id": S, "content_id": S, "balance_after": I, "created_at": DT},
    ["id", "amount", "source", "reference_id", "balance_after", "created_at"]))
named("CreditPage", obj({"transactions": arr(ref("CreditTransaction")), "next_before": I}, ["transactions"]))
named("ContentUnlock", obj({"content_id": S, "credits_spent": I, "unlocked_at": DT, "expires_at": DT}, ["content_id", "credits_spent", "unlocked_at", "expires_at"]))
named("UnlockResult", obj({"unlocked": B, "charged": B, "unlock": ref("ContentUnlock"), "balance": I, "via": S}, ["unlocked", "charged", "balance", "via"]))
named("CheckAccessResult", obj({"access_granted": B, "via": S, "unlocked_until": DT}, ["access_granted"]))

# offline
named("SyncProfile", obj({"auto_sync_enabled": B, "sync_on_wifi_only": B, "sync_frequency_hours": I,
    "conflict_strategy": {"type": "string", "enum": ["server_wins", "local_wins", "manual"]}, "last_sync_at": DT, "last_full_sync_at": DT},
    ["auto_sync_enabled", "sync_on_wifi_only", "sync_frequency_hours", "conflict_strategy"]))
named("SyncProfileResponse", obj({"profile": ref("SyncProfile"),
    "storage": obj({"used_bytes": I, "used_mb": N, "limit_mb": N}, ["used_bytes", "used_mb", "limit_mb"]),
    "limits": obj({"tier": {"type": "string", "enum": ["free", "premium"]}, "max_categories": I, "max_items_per_category": I, "storage_limit_mb": N}, ["tier", "storage_limit_mb"]),
    "categories": arr(obj({"id": S, "name": S, "item_count": I, "estimated_size_mb": N, "status": S}, ["id", "name", "item_count", "estimated_size_mb", "status"]))},
    ["profile", "storage", "limits", "categories"]))
named("DownloadJobStarted", obj({"job_id": UUIDS, "estimated_size_mb": N, "estimated_time_seconds": I, "total_count": I},
    ["job_id", "estimated_size_mb", "estimated_time_seconds"]))
named("DownloadJob", obj({"job_id": UUIDS, "status": {"type": "string", "enum": ["pending", "downloading", "paused", "completed", "completed_with_errors", "failed", "cancelled"]},
    "progress": I, "downloaded_count": I, "failed_count": I, "total_count": I, "category_ids": arr(S),
    "errors": arr(obj({"item_id": S, "error": S}, ["item_id", "error"])),
    "started_at": DT, "completed_at": DT}, ["job_id", "status", "progress", "downloaded_count", "total_count"]),
    {"job_id": "3A41A15E-FA22-4BE3-8A9A-A2400BB3E298", "status": "completed", "progress": 100, "downloaded_count": 120, "failed_count": 0,
     "total_count": 120, "category_ids": ["capitals-europe"], "errors": []})
named("OfflineCategory", obj({"category_id": S, "item_count": I, "size_bytes": I, "cursor": I, "complete": B, "downloaded_at": DT,
    "last_updated_at": DT, "last_accessed_at": DT, "expires_at": DT}, ["category_id", "item_count", "size_bytes"]))
named("Item", obj({"id": S, "version": I, "data": S, "encoding": S, "checksum": S, "size_bytes": I}, ["id", "version", "data", "encoding", "checksum"]))
named("SyncAction", obj({"id": UUIDS, "client_action_id": S, "action_type": S, "entity_type": S, "entity_id": S, "category_id": S, "payload": PAYLOAD,
    "priority": I, "status": S, "attempts": I, "last_error": S, "created_at": DT, "processed_at": DT},
    ["id", "client_action_id", "action_type", "entity_type", "entity_id", "payload", "status"]))
named("QueuedAction", obj({"queue_item": ref("SyncAction"), "position": I, "replayed": B,
    "dropped_client_action_id": {"type": "string", "description": "The client_action_id of the oldest expendable action dropped to make room (the queue was full)"}},
    ["queue_item", "position"]))
named("SyncJob", obj({"job_id": UUIDS, "status": {"type": "string", "enum": ["pending", "processing", "completed", "failed"]}, "items_to_process": I,
    "succeeded": I, "duplicates": I, "failed": I, "conflicts": I}, ["job_id", "status", "items_to_process", "succeeded", "duplicates", "failed", "conflicts"]),
    {"job_id": "C5437DD6-E224-43B6-9274-839F7DD82E15", "status": "completed", "items_to_process": 3, "succeeded": 3, "duplicates": 0, "failed": 0, "conflicts": 0})
named("SyncConflict", obj({"id": UUIDS, "queue_item_id": UUIDS, "entity_type": S, "entity_id": S, "local_data": PAYLOAD, "server_data": ANY,
    "server_version": S, "resolved": B, "resolution": S, "resolved_by": S, "final_data": ANY, "skip_count": I, "created_at": DT},
    ["id", "entity_type", "entity_id", "local_data", "server_data"]))
named("Location", obj({"id": UUIDS, "latitude": N, "longitude": N, "accuracy": N,
    "geocoded": {"type": ["object", "null"], "description": "The place named by the geocoder (null when it named none or is not configured)",
                 "properties": {"country_code": S, "country": S, "city": S}}, "timestamp": DT},
    ["id", "latitude", "longitude", "accuracy", "timestamp"]))
named("NearbyPlace", obj({"id": S, "type": S, "title": S, "distance_km": N, "metadata": PAYLOAD}, ["id", "type", "title", "distance_km"]))

# ads
named("AdAvailability", obj({"available": B, "reason": {"type": ["string", "null"]}, "cooldown_seconds": {"type": ["integer", "null"]},
    "next_available_at": {"type": ["string", "null"]}}, ["available", "reason", "cooldown_seconds", "next_available_at"]))
named("AdOffer", obj({"ad_request_id": UUIDS, "provider": S, "ad_unit_id": S, "can_show": B, "test_mode": B, "personalized": B,
    "ad_duration_seconds": I, "server_side_verification": B}, ["ad_request_id", "provider", "ad_unit_id", "can_show", "test_mode"]),
    {"ad_request_id": "CE065E21-E86A-4A62-8375-347B6A616C91", "provider": "admob", "ad_unit_id": "ca-app-pub-3940256099942544/5224354917",
     "can_show": True, "test_mode": True, "personalized": True, "ad_duration_seconds": 20, "server_side_verification": False})
named("Reward", obj({"type": S, "amount": I}, ["amount"]))
named("AdCompletion", obj({"ad_request_id": UUIDS, "ad_type": S, "completed": B, "reward_granted": B, "reward": ref("Reward"), "new_balance": I,
    "reward_status": {"type": "string", "enum": ["granted", "pending", "not_eligible"]}, "message": S, "reason": S, "cooldown_seconds": I},
    ["ad_request_id", "reward_granted"]))
named("AdConsent", obj({"answered": B, "consent_personalized_ads": B, "consent_data_sharing": B, "age_gate_passed": B, "is_under_age": B,
    "gdpr_applies": B, "att_status": S, "tcf_string": S, "consent_form_status": S, "country": S, "source": S, "updated_at": DT},
    ["consent_personalized_ads", "consent_data_sharing"]))
named("ConsentStatus", obj({"consent": nullable_copy("AdConsent"), "required": B, "gdpr_applies": B, "ads_enabled": B,
    "personalized_ads": B, "rewarded_ads_allowed": B}, ["consent", "ads_enabled"]))
named("CampaignProgress", obj({"current": I, "required": I, "completed": B, "reward_claimed": B}, ["current", "required", "completed", "reward_claimed"]))
GOAL = {"type": "integer", "minimum": 1, "maximum": 1000}
named("CampaignConditions", dict(obj({"min_ads_watched": dict(GOAL, description="watch_ads: the ads to watch"),
    "streak_days": dict(GOAL, description="streak_bonus: the days in a row"), "referrals_count": dict(GOAL, description="referral: the friends to bring"),
    "placement": {"type": "string", "description": "watch_ads: only ads of this placement count"}}),
    description="The goal, under the key of the campaign's type; other keys are kept as given"))
CAMPAIGN = {"id": UUIDS, "name": S, "description": S, "campaign_type": {"type": "string", "enum": ["watch_ads", "streak_bonus", "referral"]},
    "reward": ref("Reward"), "conditions": ref("CampaignConditions"), "progress": ref("CampaignProgress"), "starts_at": DT, "ends_at": DT,
    "status": {"type": "string", "enum": ["active", "upcoming", "expired"]}}
CAMPAIGN_REQUIRED = ["id", "name", "campaign_type", "reward", "conditions", "starts_at", "ends_at", "status"]
named("Campaign", obj(dict(CAMPAIGN, variant={"type": "string", "description": "The user's variant of an experiment; absent without variants"}), CAMPAIGN_REQUIRED))
named("CampaignVariant", obj({"key": S, "weight": {"type": "integer", "minimum": 0, "maximum": 100}, "reward_amount": I, "required": I,
    "conditions": ref("CampaignConditions"), "holdout": B}, ["key", "weight", "reward_amount", "required", "conditions", "holdout"]))
named("AdminCampaign", obj(dict(CAMPAIGN, variants=arr(ref("CampaignVariant"))), CAMPAIGN_REQUIRED + ["variants"]))
named("ClaimResult", obj({"claimed": B, "reward": ref("Reward"), "reward_status": S, "new_balance": I, "message": S}, ["claimed", "reward"]))
named("AdProvider", obj({"name": S, "priority": I, "active": B, "rewarded_unit_id": S, "interstitial_unit_id": S, "banner_unit_id": S,
    "ad_duration_seconds": I, "verification": {"type": "string", "enum": ["client", "ssv"]}, "test_mode": B, "ecpm_estimate_usd": N},
    ["name", "priority", "active"]))

FIGURES = {"requests": I, "impressions": I, "clicks": I, "completions": I, "revenue": N, "ecpm": N, "fill_rate": N, "ctr": N, "completion_rate": N,
    "estimated": dict(B, description="Part of the revenue is estimated (impressions the network has not reported yet)"), "estimated_revenue": N}
named("RevenueFigures", obj(FIGURES, list(FIGURES)))
named("RevenueReport", obj({"start_date": DATE, "end_date": DATE, "total_revenue": N, "total_impressions": I, "total_requests": I, "total_clicks": I,
    "total_completions": I, "avg_ecpm": N, "fill_rate": N, "ctr": N, "completion_rate": N, "estimated": B, "estimated_revenue": N,
    "by_date": arr(obj(dict(FIGURES, date=DATE), list(FIGURES) + ["date"])),
    "by_type": {"type": "object", "description": "By ad type (rewarded, interstitial)", "additionalProperties": ref("RevenueFigures")},
    "by_provider": {"type": "object", "description": "By provider", "additionalProperties": ref("RevenueFigures")},
    "by_placement": {"type": "object", "description": "By placement", "additionalProperties": ref("RevenueFigures")},
    "data_updated_at": {"type": ["string", "null"], "format": "date-time"}},
    ["start_date", "end_date", "total_revenue", "total_impressions", "by_date", "by_type", "by_provider", "by_placement"]))
VARIANTS = {"type": "array", "minItems": 2, "maxItems": 10, "items": obj({"key": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,32}$"},
    "weight": {"type": "integer", "minimum": 0, "maximum": 100}, "reward": obj({"type": S, "amount": {"type": "integer", "minimum": 1, "maximum": 1000}}, ["amount"]),
    "conditions": ref("CampaignConditions"), "holdout": B}, ["key", "weight"])}
PURCHASE = body(obj({"store": {"type": "string", "enum": ["apple", "google"]}, "signed_transaction": S, "receipt_data": S, "plan_id": UUIDS,
    "purchase_token": S, "product_id": S}, ["store"]))
def purchase_op(summary):
    o = aop(summary, ok="201", req=PURCHASE, schema=ref("PurchaseResult"))
    o["responses"]["200"] = with_headers({"200": {"description": "Already known", "content": {"application/json": {"schema": ref("PurchaseResult")}}}})["200"]
    return o
ADMIN = "Operator: the platform's admin token, an operator key or a console member's access token (Authorization: Bearer), with X-App-ID; X-API-Key is checked when sent. The member's role must reach the route's (viewer reads; support acts for a player; admin changes settings; owner manages the team)."
def admin(summary, schema=FREE, req=None, params=(), ok="200", extra=("409",)):
    o = op(f"{summary} ({ADMIN.split(':')[0].lower()})", ok=ok, params=params, req=req, schema=schema, extra=list(extra))
    o["description"] = ADMIN
    o["security"] = [{"appId": [], "bearer": []}]
    return o
FREEBODY = body(FREE)
WEBHOOK_EVENT = {"type": "string", "enum": ["subscription.activated", "subscription.renewed", "subscription.grace_period_started", "subscription.expired", "subscription.refunded", "subscription.cancelled", "credits.earned", "credits.spent", "campaign.completed", "user.created", "user.deleted", "consent.changed", "sync.conflict_opened", "download.completed", "*"]}
NAME120 = {"type": "string", "minLength": 1, "maxLength": 120}; DESC1000 = {"type": "string", "maxLength": 1000}
REASON = {"type": "string", "minLength": 1, "maxLength": 500, "description": "Why (the ticket), kept in the ledger and the audit log"}
named("NotificationReceipt", obj({"received": B, "result": {"type": "string", "description": "What the notification did (applied, duplicate, unknown_subscription, …)"}},
    ["received", "result"]))
IDEMPOTENCY_KEY = {"name": "Idempotency-Key", "in": "header", "required": True, "description": "One grant per key: a retry with the same key answers the first result (replayed)", "schema": {"type": "string", "pattern": "^[!-~]{1,100}$"}}
ads = {
 "/ads/available": {"get": op("Whether an ad can be shown now (UC-ADS-4.1 step 3, 4.2 step 5)",
    params=[q("ad_type", {"type": "string", "enum": ["rewarded", "interstitial"]}, True), q("placement", S), q("country", S)],
    schema=ref("AdAvailability"))},
 "/ads/request": {"post": op("Request an ad: provider by priority, unit id", ok="201", okdesc="Created", extra=["403"],
    req=body(obj({"ad_type": {"type": "string", "enum": ["rewarded", "interstitial"]}, "placement": S, "provider_preference": S}, ["ad_type"])),
    schema=ref("AdOffer"))},
 "/ads/{id}/impression": {"post": op("Record load/show", params=[p("id", UUIDS)],
    req=body(obj({"loaded": B, "shown": B, "load_time_ms": I, "error": {"type": "string", "maxLength": 500}}, ["loaded", "shown"])), schema=obj({"recorded": B}, ["recorded"]))},
 "/ads/{id}/complete": {"post": op("Complete a view (after its impression: 409 ad_not_shown otherwise); a rewarded view may earn 1 credit", params=[p("id", UUIDS)], extra=["409", "410"],
    req=body(obj({"completed": B, "clicked": B, "display_duration_ms": I, "revenue_usd": N}, ["completed", "display_duration_ms"])),
    schema=ref("AdCompletion"))},
 "/ads/ssv/admob": {"get": dict(op("AdMob server-side verification callback (signed query)", extra=["403"],
    params=[q("transaction_id", S), q("custom_data", S), q("signature", S), q("key_id", S)], schema=obj({"status": S}, ["status"])), security=[])},
 "/ads/consent": {
    "get": op("The current ad consent and whether GDPR applies", params=[q("country", S)],
        schema=ref("ConsentStatus")),
    "post": op("Record a consent change (GDPR, COPPA, ATT, TCF); under 13 sticks until a birth_date says 13+", extra=["403"],
        req=body(obj({"consent_personalized_ads": B, "consent_data_sharing": B, "birth_date": {"type": "string", "format": "date"},
        "age_gate_passed": B, "is_under_age": B, "att_status": {"type": "string", "enum": ["authorized", "denied", "restricted", "not_determined"]},
        "tcf_string": S, "consent_form_status": {"type": "string", "enum": ["obtained", "required", "not_required", "unknown"]}, "country": S})),
        schema=ref("ConsentStatus"))},
 "/campaigns/active": {"get": op("Running campaigns with the user's progress", schema=obj({"campaigns": arr(ref("Campaign"))}, ["campaigns"]))},
 "/campaigns/{id}": {
    "get": op("A campaign with the user's progress", params=[p("id", UUIDS)], schema=ref("Campaign")),
    "post": op("Progress as the server counted it (a streak campaign records today's check-in)", params=[p("id", UUIDS)],
        schema=obj({"campaign_id": UUIDS, "progress": I, "required": I, "completed": B, "can_claim_reward": B}, ["campaign_id", "progress", "completed"]))},
 "/campaigns/{id}/claim-reward": {"post": op("Claim a completed campaign's credits once", params=[p("id", UUIDS)],
    schema=ref("ClaimResult"))},
 "/referral/code": {"get": op("The user's referral code", schema=obj({"code": S}, ["code"]))},
 "/referral/redeem": {"post": op("Redeem another user's referral code", extra=["409"], req=body(obj({"code": S}, ["code"])), schema=obj({"redeemed": B}, ["redeemed"]))},
 "/admin/providers": {"get": op("Ad providers (admin token)", schema=obj({"providers": arr(ref("AdProvider"))}, ["providers"]))},
 "/admin/providers/{name}": {"put": op("Create or update an ad provider (admin token)", params=[p("name", {"type": "string", "pattern": "^[a-z0-9_]{1,40}$"})],
    req=body(obj({"priority": I, "active": B, "rewarded_unit_id": S, "interstitial_unit_id": S, "banner_unit_id": S, "ad_duration_seconds": {"type": "integer", "minimum": 1, "maximum": 600},
                  "verification": {"type": "string", "enum": ["client", "ssv"]}, "test_mode": B, "ecpm_estimate_usd": N})), schema=ref("AdProvider"))},
 "/admin/campaigns": {"post": op("Create a campaign (admin token)", ok="201", okdesc="Created", req=body(obj({"name": NAME120, "description": DESC1000,
    "campaign_type": {"type": "string", "enum": ["watch_ads", "streak_bonus", "referral"]}, "reward": obj({"type": S, "amount": {"type": "integer", "minimum": 1, "maximum": 1000}}, ["amount"]),
    "conditions": ref("CampaignConditions"), "starts_at": {"type": "string", "format": "date-time"}, "ends_at": {"type": "string", "format": "date-time"},
    "variants": VARIANTS}, ["name", "campaign_type", "reward", "conditions", "ends_at"])), schema=ref("AdminCampaign")),
    "get": op("The app's campaigns, latest start first, with their variants (admin token)",
        params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 100}), q("offset", {"type": "integer", "minimum": 0, "maximum": 100000})],
        schema=obj({"campaigns": arr(ref("AdminCampaign")), "limit": I, "offset": I}, ["campaigns", "limit", "offset"]))},
 "/admin/campaigns/{id}": {"get": op("A campaign with its variants, as the create and the edit answer it (admin token)", params=[p("id", UUIDS)],
    schema=ref("AdminCampaign")),
    "patch": op("Edit a campaign (admin token): name, description, end, the variants' weights, rewards and goals; "
    "a variant with assigned users cannot be removed (409 variant_has_users)", params=[p("id", UUIDS)], extra=["409"],
    req=body(obj({"name": NAME120, "description": DESC1000, "ends_at": {"type": "string", "format": "date-time"}, "variants": VARIANTS})), schema=ref("AdminCampaign"))},
 "/admin/campaigns/{id}/results": {"get": op("An experiment's results per variant (admin token): funnel, completion rate, difference vs the first "
    "variant with its 95% CI and p-value, sample-ratio check, by day; ?format=csv", params=[p("id", UUIDS), q("format", {"type": "string", "enum": ["json", "csv"]})],
    schema=obj({"campaign_id": UUIDS, "name": S, "variants": arr(obj({"key": {"type": ["string", "null"], "description": "null: a campaign without variants"},
        "weight": {"type": ["integer", "null"]}, "holdout": B, "reward_amount": I, "required": I, "assigned": I, "exposed": I, "joined": I, "completed": I,
        "claimed": I, "credits_granted": I, "completion_rate": {"type": ["number", "null"], "description": "completed / exposed; null before anyone was shown it"},
        "versus_first": {"type": ["object", "null"], "description": "Against the first variant: the difference of completion rates with its 95 % interval",
            "properties": {"difference": N, "ci95_low": N, "ci95_high": N, "z": N, "p_value": N}, "required": ["difference", "ci95_low", "ci95_high", "z", "p_value"]}},
        ["key", "holdout", "reward_amount", "required", "assigned", "exposed", "joined", "completed", "claimed", "credits_granted"])),
        "sample_ratio": {"type": ["object", "null"], "description": "The split against the weights (chi-square); mismatch below p 0.001",
            "properties": {"chi_square": N, "p_value": N, "mismatch": B}, "required": ["chi_square", "p_value", "mismatch"]},
        "by_day": arr(obj({"day": DATE, "exposed": I, "completed": I, "cumulative_completion_rate": {"type": ["number", "null"]}}, ["day", "exposed", "completed"])),
        "warnings": arr(S)},
               ["campaign_id", "name", "variants", "by_day", "warnings"]))},
 "/admin/campaigns/{id}/end": {"post": op("End a campaign now (admin token)", params=[p("id", UUIDS)], schema=ref("Campaign"))},
 "/analytics/revenue": {"get": dict(op("Revenue report from daily aggregates (admin token); ?format=csv for the export",
    params=[q("start_date", {"type": "string", "format": "date"}), q("end_date", {"type": "string", "format": "date"}),
            q("ad_type", {"type": "string", "enum": ["rewarded", "interstitial"]}), q("provider", S), q("placement", S),
            q("format", {"type": "string", "enum": ["json", "csv"]})], schema=ref("RevenueReport")))},
 "/analytics/dashboard": {"get": {"summary": "HTML revenue dashboard (admin token)", "parameters": [q("start_date", {"type": "string", "format": "date"}),
    q("end_date", {"type": "string", "format": "date"})], "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": S}}},
    **{c: {"$ref": f"#/components/responses/{ERROR_NAMES[c]}"} for c in ["400", "401", "422", "429", "503"]}}}},
 "/analytics/refresh": {"post": op("Refresh the daily aggregates now (admin token)", schema=obj({"refreshed_days": I}, ["refreshed_days"]))},
}
rev = ads["/analytics/revenue"]["get"]["responses"]["200"]["content"]; rev["text/csv"] = {"schema": S}
ads["/admin/campaigns/{id}/results"]["get"]["responses"]["200"]["content"]["text/csv"] = {"schema": S}

off = {
 "/sync/profile": {"get": op("Sync profile, categories and storage", schema=ref("SyncProfileResponse")),
    "patch": op("Change sync settings", extra=["403"], req=body(obj({"auto_sync_enabled": B, "sync_on_wifi_only": B, "sync_frequency_hours": {"type": "integer", "minimum": 1, "maximum": 168},
        "conflict_strategy": {"type": "string", "enum": ["server_wins", "local_wins", "manual"]}})), schema=obj({"profile": ref("SyncProfile")}, ["profile"]))},
 "/categories/download": {"post": op("Start a download job (limits checked first)", ok="202", okdesc="Accepted", extra=["403", "507"],
    req=body(obj({"category_ids": {"type": "array", "items": S, "minItems": 1, "maxItems": 50}}, ["category_ids"])),
    schema=ref("DownloadJobStarted"))},
 "/categories/download/{job}": {"get": op("Download progress", params=[p("job", UUIDS)],
    schema=ref("DownloadJob"))},
 "/categories/download/{job}/pause": {"post": op("Pause a download", extra=["409"], params=[p("job", UUIDS)], schema=ref("DownloadJob"))},
 "/categories/download/{job}/resume": {"post": op("Resume a paused download", extra=["409"], params=[p("job", UUIDS)], schema=ref("DownloadJob"))},
 "/categories/downloaded": {"get": op("The user's offline categories", schema=obj({"categories": arr(ref("OfflineCategory"))}, ["categories"]))},
 "/categories/{id}/items": {"get": op("The pack (paged; base64 data, encoding, SHA-256 checksum)", params=[p("id"), q("after", S), q("limit", {"type": "integer", "minimum": 1, "maximum": 500})],
    schema=obj({"items": arr(ref("Item")), "next_after": S}, ["items"]))},
 "/categories/{id}/check-updates": {"get": op("Changes since a cursor", params=[p("id"), q("cursor", I)],
    schema=obj({"category_id": S, "cursor": I, "added": I, "updated": I, "deleted": I, "next_cursor": I, "has_updates": B, "full_download_required": B},
               ["added", "updated", "deleted", "next_cursor"]))},
 "/categories/{id}/refresh": {"post": op("Apply the changes to the copy", extra=["409"], params=[p("id")],
    schema=obj({"updated": B, "changes": obj({"added": I, "updated": I, "deleted": I}, ["added", "updated", "deleted"]), "cursor": I,
                "not_applied": arr(obj({"item_id": S, "reason": S}, ["item_id", "reason"]))}, ["updated", "changes"]))},
 "/categories/{id}": {"delete": op("Delete a category from the copy", extra=["409"], params=[p("id"), q("force", S)],
    schema=obj({"deleted": B, "categories_deleted": I, "space_freed_mb": N}, ["deleted", "space_freed_mb"]))},
 "/categories": {"delete": op("Delete the whole copy", extra=["409"], params=[q("force", S)], schema=obj({"deleted": B, "categories_deleted": I, "space_freed_mb": N}, ["deleted"]))},
 "/storage/suggestions": {"get": op("What to free", schema=obj({"suggestions": arr(obj({"category_id": S, "reason": S, "size_mb": N}, ["category_id", "reason", "size_mb"])), "freeable_mb": N}, ["suggestions"]))},
 "/sync/queue": {"post": op("Queue an offline action (idempotent on client_action_id); a guest has no cloud save (403)", ok="201", okdesc="Created", extra=["403"],
    req=body(obj({"client_action_id": S, "action_type": S, "entity_type": S, "entity_id": S, "category_id": S, "payload": PAYLOAD,
                  "priority": {"type": "integer", "minimum": 1, "maximum": 10}}, ["client_action_id", "action_type", "entity_type", "entity_id", "payload"])),
    schema=ref("QueuedAction")),
    "get": op("The user's queued actions", schema=obj({"actions": arr(ref("SyncAction"))}, ["actions"]))},
 "/sync/execute": {"post": op("Send the queue (not for guests: 403)", ok="202", okdesc="Accepted", extra=["403"], schema=ref("SyncJob"))},
 "/sync/execute/{job}": {"get": op("Sync job progress", params=[p("job", UUIDS)], schema=ref("SyncJob"))},
 "/sync/conflicts": {"get": op("Open conflicts", schema=obj({"conflicts": arr(ref("SyncConflict"))}, ["conflicts"]))},
 "/sync/conflicts/{id}/resolve": {"post": op("Resolve a conflict", extra=["409", "502"], params=[p("id", UUIDS)],
    req=body(obj({"resolution": {"type": "string", "enum": ["local_wins", "server_wins", "merge", "skip"]},
                  "merge_data": {"type": "object", "additionalProperties": {"type": "string", "enum": ["local", "server"]}}}, ["resolution"])),
    schema=obj({"resolved": B, "resolution": S, "final_data": ANY, "skip_count": I}, ["resolved", "resolution"]))},
 "/location/update": {"post": op("Record the user's location (consent, 15 min, accuracy <= 1 km)", ok="201", okdesc="Created", extra=["403"],
    req=body(obj({"latitude": N, "longitude": N, "accuracy": N, "altitude": N, "source": {"type": "string", "enum": ["gps", "wifi", "cell", "ip"]},
                  "consent_given": B}, ["latitude", "longitude", "accuracy", "consent_given"])), schema=obj({"location": ref("Location")}, ["location"]))},
 "/location/nearby-content": {"get": op("Place-based content near the last location", extra=["409"],
    params=[q("radius_km", {"type": "number", "exclusiveMinimum": 0, "maximum": 200})],
    schema=obj({"content": arr(ref("NearbyPlace"))}, ["content"]))},
 "/admin/sync-upstream": {"get": admin("Where the app's synced actions go (the game server's routes)",
        schema=obj({"routes": obj({}) | {"additionalProperties": S}, "is_default": B, "version": I, "secret_version": I}, ["routes", "is_default"])),
    "put": admin("Set the app's game-server routes", req=body(obj({"routes": {"type": "object", "description": "Action type (or * for the rest) to the game server's URL",
        "additionalProperties": S}}, ["routes"])), schema=obj({"version": I}, ["version"]))},
 "/admin/sync-upstream/rotate-secret": {"post": admin("A new signing secret for the game server (shown once)",
    schema=obj({"secret": S, "secret_version": I}, ["secret", "secret_version"]))},
 "/admin/categories": {"get": admin("The app's categories by id, with their live items and bytes (the console's Catalogue)",
    params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 100}),
            q("after", {"type": "string", "minLength": 1, "maxLength": 100, "pattern": "^[A-Za-z0-9._-]+$", "description": "The next_after of the previous page"})],
    schema=obj({"categories": arr(obj({"id": S, "name": S, "description": S, "active": B, "items": I, "size_bytes": I, "updated_at": DT},
        ["id", "name", "description", "active", "items", "size_bytes", "updated_at"])), "next_after": {"type": ["string", "null"]}}, ["categories"]))},
 "/admin/categories/{id}": {"put": op("Create or update a category (admin token)", params=[p("id")], req=body(obj({"name": {"type": "string", "minLength": 1, "maxLength": 200}, "description": S}, ["name"])),
    schema=obj({"id": S, "name": S}, ["id", "name"]))},
 "/admin/categories/{id}/items": {"post": op("Upsert or delete items, 1,000 per batch (admin token)", params=[p("id")],
    req=body(obj({"upsert": {"type": "array", "maxItems": 1000, "items": obj({"id": S, "data": dict(PAYLOAD, description="The item as the app reads it")}, ["id", "data"])},
                  "delete": {"type": "array", "maxItems": 1000, "items": S}})), schema=obj({"upserted": I, "deleted": I}, ["upserted", "deleted"]))},
 "/admin/location-content/{id}": {"put": op("Create or update place-based content (admin token)", params=[p("id")],
    req=body(obj({"title": S, "content_type": S, "latitude": {"type": "number", "minimum": -90, "maximum": 90},
                  "longitude": {"type": "number", "minimum": -180, "maximum": 180}, "metadata": dict(PAYLOAD, description="What the app shows with the place"),
                  "available_until": {"type": "string", "format": "date-time"}, "active": B}, ["title", "latitude", "longitude"])),
    schema=obj({"id": S}, ["id"]))},
}
# The same client_action_id again (a retry after a lost answer): the first answer, replayed.
_queue = off["/sync/queue"]["post"]["responses"]
_queue["200"] = with_headers({"200": {"description": "The same action again (replayed: true)", "content": _queue["201"]["content"]}})["200"]
ERRS.update({"402": "Not enough credits"})
BROAD = ["403", "409", "410", "402", "502"]
DEV = obj({"device_id": S, "platform": S, "app_version": S, "os_version": S})
CREDS = obj({"email": S, "password": S, "google_id_token": S, "apple_identity_token": S, "apple_authorization_code": S, "nonce": S,
             "device_id": S, "guest_secret": S, "user_info": obj({"first_name": S, "last_name": S, "email": S})})
AUTHREQ = body(obj({"provider": {"type": "string", "enum": ["email", "google", "apple", "guest"]}, "credentials": CREDS, "device_info": DEV},
                   ["provider", "credentials"]))
TOKENS = ref("Session")
def aop(summary, ok="200", req=None, params=(), schema=None, public=False):
    o = op(summary, ok=ok, extra=BROAD, params=params, req=req, schema=schema)
    if public: o["security"] = [{"appId": [], "apiKey": []}]
    return o
def creates_on_first_use(o):
    # A first sign-in with a guest device, Google or Apple makes the account: 201 then, 200 after.
    o["responses"]["201"] = {"description": "Created: the account was made by this first sign-in",
                             "content": {"application/json": {"schema": TOKENS}}}
    return o
LIVE_TYPES = ["state.snapshot", "stream.reset", "stream.replaced", "stream.closing", "subscription.updated", "credits.updated",
              "consent.updated", "sync.conflict_opened", "download.completed", "campaign.completed", "session.revoked", "account.deleted"]
named("LiveEvent", obj({"type": {"type": "string", "enum": LIVE_TYPES}, "id": UUIDS, "app_id": UUIDS, "created_at": DT,
                        "version": {"type": "integer", "description": "The owner's version of the fact (premium, consents, the ledger row)"},
                        "data": {"type": "object", "additionalProperties": {}, "description": "docs/LIVE.md lists each type's fields"},
                        "cursor": {"type": "string", "description": "WebSocket only (SSE: the id: line); opaque, resume with ?after="}},
                       ["type", "id", "app_id", "created_at", "version", "data"]),
      {"type": "credits.updated", "id": "6f1c2b7e-4d3a-4c8e-9a1b-2c3d4e5f6a7b", "app_id": "0f8e2a6c-1b3d-4e5f-8a9b-0c1d2e3f4a5b",
       "created_at": "2026-11-27T10:00:00Z", "version": 1812, "data": {"balance": 15, "delta": 5, "source": "ad_reward", "version": 1812},
       "cursor": "42-6f1c2b7e"})
ROLE = {"type": "string", "enum": ["owner", "admin", "support", "viewer"]}
named("ConsoleMember", obj({"id": UUIDS, "email": S, "role": ROLE, "totp": dict(B, description="Has a second factor"), "created_at": DT},
    ["id", "email", "role", "totp", "created_at"]))
named("ConsoleSession", obj({"access_token": S, "token_type": S, "expires_in": I, "member": ref("ConsoleMember")},
    ["access_token", "token_type", "expires_in", "member"]))
named("ConsoleTeam", obj({"members": arr(ref("ConsoleMember")), "invites": arr(obj({"email": S, "role": ROLE, "expires_at": DT}, ["email", "role", "expires_at"])),
    "requires_totp": B}, ["members", "invites", "requires_totp"]))
named("ConsoleInvite", obj({"app_id": UUIDS, "app_name": S, "email": S, "role": ROLE, "expires_at": DT, "totp_required": B,
    "totp_secret": dict(S, description="base32, for an authenticator app"), "totp_uri": dict(S, description="otpauth:// link (a QR code of it)")},
    ["app_id", "app_name", "email", "role", "expires_at", "totp_required", "totp_secret", "totp_uri"]))
def console_op(summary, req=None, schema=None, ok="200", cookie=False, app=True):
    o = op(summary, ok=ok, req=req, schema=schema, extra=["403", "409", "429"])
    o["security"] = [{"appId": []}] if app else []
    if cookie:
        # The refresh cookie and X-Console-Request: 1 are described, not declared: a generated
        # client must not send the cookie itself (the browser does), and a fuzzer's cookie bytes
        # are not what a browser sends.
        o["description"] = "Needs the console_refresh cookie (set by sign-in) and the header X-Console-Request: 1."
    return o
def live_op(summary, sse):
    o = op(summary, params=[q("after", {"type": "string", "maxLength": 64}), q("ticket", {"type": "string", "maxLength": 128}),
                            {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string", "maxLength": 64}}])
    del o["responses"]["200"]
    for c in ["404", "413", "415", "422", "429"]: o["responses"].pop(c, None)
    if sse:
        o["responses"]["200"] = {"description": "text/event-stream: each event's data is a LiveEvent",
                                 "content": {"text/event-stream": {"schema": {"type": "string"}}}}
    else:
        o["responses"]["101"] = {"description": "Switching Protocols: each text frame is a LiveEvent",
                                 "content": {"application/json": {"schema": ref("LiveEvent")}}}
        o["responses"]["426"] = {"$ref": "#/components/responses/UpgradeRequired"}
    # A bearer token with X-App-ID, or a ticket in the query.
    o["security"] = [{"appId": [], "bearer": []}, {}]
    return o
auth = {
 "/auth/register": {"post": aop("Create an account (email, google, apple, guest)", ok="201", req=AUTHREQ, schema=TOKENS, public=True)},
 "/auth/login": {"post": creates_on_first_use(aop("Sign in (creates the account on a first guest, Google or Apple sign-in)",
                                                  req=AUTHREQ, schema=TOKENS, public=True))},
 "/auth/refresh": {"post": aop("Rotate a refresh token", req=body(obj({"refresh_token": S}, ["refresh_token"])), schema=TOKENS, public=True)},
 "/auth/logout": {"post": aop("Sign out this device or all (its push token goes too)", req=body(obj({"refresh_token": S, "all": B})),
    schema=obj({"logged_out": B, "revoked_sessions": I}, ["logged_out"]))},
 "/auth/push-tokens": {
    "get": aop("The user's devices registered for push (a token shown by its last 8 characters)", schema=obj({"devices": arr(ref("PushDevice"))}, ["devices"])),
    "put": aop("Register or move a device's push token (one token, one user; at most 20 devices: 422 too_many_devices)",
        req=body(obj({"device_id": {"type": "string", "minLength": 1, "maxLength": 200}, "platform": {"type": "string", "enum": ["ios", "android"]},
                      "token": S, "environment": {"type": "string", "enum": ["sandbox", "production"]}, "locale": {"type": "string", "enum": ["fr", "en"]}},
                     ["device_id", "platform", "token"])),
        schema=ref("PushDevice"))},
 "/auth/push-tokens/{device_id}": {"delete": aop("Remove a device's push token", params=[p("device_id", {"type": "string", "minLength": 1, "maxLength": 200})],
    schema=obj({"removed": B}, ["removed"]))},
 "/auth/me": {"get": aop("The signed-in user", schema=ref("UserResponse")),
              "delete": aop("Schedule the account's deletion (J+30)", ok="202", req={"required": False, "content": {"application/json": {"schema": obj({"reason": S})}}}, schema=ref("DeletionScheduled"))},
 "/auth/deletion/cancel": {"post": aop("Cancel a scheduled deletion", req=body(obj({"token": S}, ["token"])), public=True, schema=obj({"deletion_cancelled": B, "message": S}, ["deletion_cancelled"]))},
 "/auth/verify-email": {"post": aop("Verify an email address", req=body(obj({"token": S}, ["token"])), public=True, schema=obj({"email_verified": B, "message": S}, ["email_verified"]))},
 "/auth/verify-email/resend": {"post": aop("Send the verification email again", schema=obj({"sent": B}, ["sent"]))},
 "/auth/password/forgot": {"post": aop("Start a password reset (same answer whether or not the address exists)", req=body(obj({"email": S}, ["email"])), public=True,
    schema=obj({"message": S}, ["message"]))},
 "/auth/password/reset": {"post": aop("Reset the password (every session of the account ends)", req=body(obj({"token": S, "new_password": S}, ["token", "new_password"])), public=True,
    schema=obj({"password_reset": B, "revoked_sessions": I}, ["password_reset", "revoked_sessions"]))},
 "/auth/otp/send": {"post": aop("Send a sign-in code by email", req=body(obj({"email": S}, ["email"])), public=True,
    schema=obj({"sent": B, "expires_in": dict(I, description="Seconds the code is valid")}, ["sent", "expires_in"]))},
 "/auth/otp/verify": {"post": aop("Sign in with the emailed code", req=body(obj({"email": S, "code": S, "device_info": DEV}, ["email", "code"])), schema=TOKENS, public=True)},
 "/auth/link": {"post": aop("Link another sign-in method", req=AUTHREQ, schema=TOKENS)},
 "/auth/link/{provider}": {"delete": aop("Unlink a sign-in method", params=[p("provider", {"type": "string", "enum": ["email", "google", "apple"]})],
    schema=ref("UserResponse"))},
 "/auth/game-center/link": {"post": aop("Link Game Center (signature checked against Apple's certificate)", req=body(obj({"player_id": S, "alias": S,
    "public_key_url": S, "signature": S, "salt": S, "timestamp": I, "achievements": ACHIEVEMENTS, "leaderboard_score": SCORE},
    ["player_id", "public_key_url", "signature", "salt", "timestamp"])), schema=ref("GameCenterLink"))},
 "/auth/game-center/sync": {"post": aop("Merge Game Center progress: achievements are a union, the score the best", req=body(obj({"achievements": ACHIEVEMENTS,
    "leaderboard_score": SCORE}, ["achievements", "leaderboard_score"])), schema=ref("GameCenterLink"))},
 "/auth/game-center/unlink": {"post": aop("Unlink Game Center", schema=obj({"linked": {"type": "boolean", "const": False}}, ["linked"]))},
 "/auth/privacy": {"get": aop("Privacy settings", schema=ref("PrivacyResponse")),
                   "patch": aop("Change consents", req=body(obj({"consent_analytics": B, "consent_third_party": B, "consent_geolocation": B,
                        "consent_personalized_ads": B, "consent_notifications": B, "consent_game_center": B})), schema=ref("PrivacyResponse"))},
 "/auth/privacy/export": {"post": aop("Request a data export", ok="202", schema=ref("ExportStatus"))},
 "/auth/privacy/export/{id}": {"get": aop("An export's status", params=[p("id", UUIDS)], schema=ref("ExportStatus"))},
 "/privacy/export/{id}/download": {"get": dict(aop("The export document (the link in the export's e-mail and status; its signed token is the credential)",
    params=[p("id", UUIDS), q("token", S, True)], schema=obj({"export_id": S, "app_id": S, "user_id": S, "generated_at": S,
    "services": {"type": "object", "description": "Each service's part, by its name (auth, subscription, offline, ads): its tables' rows",
                 "additionalProperties": {"type": "object", "additionalProperties": {"description": "A table's rows, or a section's value"}}}},
    ["export_id", "services"])), security=[])},
 "/admin/app": {"get": admin("The app: name, state, key prefix", schema=obj({"id": UUIDS, "name": S, "active": B, "api_key_prefix": S,
    "previous_key_valid_until": DT, "operator_keys": arr(obj({"id": UUIDS, "name": S, "prefix": S, "created_at": DT, "revoked_at": DT},
    ["id", "name", "prefix", "created_at"]))}, ["id", "name", "active", "api_key_prefix", "operator_keys"]))},
 "/admin/app/disable": {"post": admin("Disable the app (its keys stop working)", schema=obj({"active": B}, ["active"]))},
 "/admin/email-settings": {"get": admin("The app's e-mail settings (sender, templates)", schema=obj({"settings": ref("EmailSettings"),
    "is_own": dict(B, description="False: the deployment's defaults apply"), "version": I}, ["settings", "is_own", "version"])),
    "put": admin("Set the app's e-mail settings", req=body(ref("EmailSettings")), schema=obj({"version": I}, ["version"]))},
 "/admin/sign-in": {"get": admin("The app's sign-in settings (Google client ids, Apple services id)", schema=ref("SignInSettings")),
    "put": admin("Set the app's sign-in settings", req=body(obj({"google_client_ids": arr(S), "apple_bundle_ids": arr(S),
        "apple": obj({"team_id": S, "key_id": S, "client_id": S, "private_key_pem": {"type": "string", "description": "Sealed, never read back"}},
                     ["team_id", "key_id", "client_id", "private_key_pem"])})), schema=ref("SignInSettings"))},
 "/admin/users": {"get": admin("Find a user by e-mail (support)", params=[q("email", S, True)], schema=ref("SupportUser"))},
 "/admin/users/{id}": {"get": admin("A user (support)", params=[p("id", UUIDS)], schema=ref("SupportUser"))},
 "/admin/users/{id}/timeline": {"get": admin("A user's events across the four services (support)", params=[p("id", UUIDS), q("limit", I)],
    schema=obj({"user_id": S, "events": arr(obj({"at": DT, "service": S, "kind": S, "summary": S}, ["at", "service", "kind", "summary"])),
                "incomplete": arr(S)}, ["user_id", "events"]))},
 "/admin/users/{id}/sessions/revoke": {"post": admin("Sign a user out everywhere: refresh tokens revoked, sessions ended in every service, push devices forgotten (support)",
    params=[p("id", UUIDS)], req=body(obj({"reason": REASON}, ["reason"])), schema=obj({"revoked_sessions": I}, ["revoked_sessions"]))},
 "/admin/users/{id}/deletion/cancel": {"post": admin("Cancel a user's scheduled deletion (support); 409 deletion_not_scheduled when none is",
    params=[p("id", UUIDS)], req=body(obj({"reason": REASON}, ["reason"])), schema=obj({"deletion_cancelled": B}, ["deletion_cancelled"]))},
 "/admin/push": {"get": admin("The app's push credentials (fingerprints, last refusal) and settings", schema=ref("PushSetup"))},
 "/admin/push/apns": {"put": admin("Set the app's APNs key (.p8, key id, team id, topic); sealed, never read back",
    req=body(obj({"team_id": S, "key_id": S, "private_key": {"type": "string", "description": "The .p8 file's PEM"}, "topic": S,
                  "environment": {"type": "string", "enum": ["sandbox", "production"]}}, ["team_id", "key_id", "private_key", "topic"])), schema=ref("PushSetup"))},
 "/admin/push/fcm": {"put": admin("Set the app's FCM service account; sealed, never read back",
    req=body(obj({"service_account": obj({"type": {"type": "string", "const": "service_account"}, "project_id": S, "client_email": S, "private_key": S,
                  "private_key_id": S}, ["project_id", "client_email", "private_key"])}, ["service_account"])), schema=ref("PushSetup"))},
 "/admin/push/settings": {"put": admin("Daily limit, opt-in, default locale, templates", req=body(ref("PushSettings")), schema=ref("PushSetup"))},
 "/admin/push/{provider}": {"delete": admin("Remove the app's APNs or FCM credentials", ok="204",
    params=[p("provider", {"type": "string", "enum": ["apns", "fcm"]})])},
 "/admin/push/sends": {"get": admin("The app's recent sends, newest first: each device's provider answer",
    params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 100}),
            q("before", {"type": "string", "maxLength": 20, "pattern": "^[0-9]+$", "description": "The next_before of the previous page"})],
    schema=obj({"sends": arr(obj({"id": I, "notification_id": I, "user_id": UUIDS, "kind": S, "device_id": {"type": ["string", "null"]},
        "provider": {"type": ["string", "null"]}, "outcome": dict(S, description="sent, removed_token, failed, skipped_consent, skipped_limit, no_device, no_credentials"),
        "status_code": {"type": ["integer", "null"]}, "reason": {"type": ["string", "null"]}, "sent_at": DT},
        ["id", "notification_id", "user_id", "kind", "outcome", "sent_at"])), "next_before": {"type": ["string", "null"]}}, ["sends"]))},
 "/admin/push/test": {"post": admin("Send a test push to a user's devices; each device's provider answer", req=body(obj({"user_id": UUIDS}, ["user_id"])),
    schema=ref("PushSendResult"))},
 "/admin/push/send": {"post": admin("Send a message to a user's devices", req=body(obj({"user_id": UUIDS, "title": {"type": "string", "minLength": 1, "maxLength": 100},
    "body": {"type": "string", "minLength": 1, "maxLength": 400}, "key": {"type": "string", "description": "One message per key: a retry sends nothing twice"}},
    ["user_id", "title", "body"])), schema=ref("PushSendResult"))},
 "/admin/webhooks": {
    "post": admin("Add an endpoint of the app's servers (https; at most 20): its secret is shown once", ok="201", extra=(),
        req=body(obj({"url": {"type": "string", "maxLength": 2048}, "events": {"type": "array", "minItems": 1, "items": WEBHOOK_EVENT},
                      "description": {"type": "string", "maxLength": 500}}, ["url", "events"])), schema=ref("WebhookSecret")),
    "get": admin("The app's endpoints", schema=obj({"endpoints": arr(ref("WebhookEndpoint"))}, ["endpoints"]))},
 "/admin/webhooks/{id}": {
    "get": admin("An endpoint", params=[p("id", UUIDS)], schema=ref("WebhookEndpoint")),
    "patch": admin("Change an endpoint's url, events, description; disable or enable it", params=[p("id", UUIDS)],
        req=body(obj({"url": {"type": "string", "maxLength": 2048}, "events": {"type": "array", "minItems": 1, "items": WEBHOOK_EVENT},
                      "description": {"type": "string", "maxLength": 500}, "disabled": B})), schema=ref("WebhookEndpoint")),
    "delete": admin("Remove an endpoint (its deliveries go with it)", params=[p("id", UUIDS)], schema=obj({"deleted": B}, ["deleted"]))},
 "/admin/webhooks/{id}/rotate-secret": {"post": admin("A new secret; the old one keeps signing for 24 h", params=[p("id", UUIDS)], schema=ref("WebhookSecret"))},
 "/admin/webhooks/{id}/deliveries": {"get": admin("The endpoint's deliveries, newest first: status, attempts, answer code, latency",
    params=[p("id", UUIDS), q("limit", {"type": "integer", "minimum": 1, "maximum": 500}),
            q("before", {"type": "string", "maxLength": 20, "pattern": "^[0-9]+$", "description": "The next_before of the previous page"})],
    schema=obj({"deliveries": arr(ref("WebhookDelivery")), "next_before": {"type": ["string", "null"]}}, ["deliveries"]))},
 "/admin/webhooks/{id}/deliveries/{delivery}/replay": {"post": admin("Send a delivery again now", ok="202",
    params=[p("id", UUIDS), p("delivery", {"type": "string", "pattern": "^[0-9]{1,18}$"})], schema=obj({"replayed": B}, ["replayed"]))},
 "/admin/members": {"get": admin("The app's console team: members (role, second factor), pending invites, whether a second factor is required",
    schema=ref("ConsoleTeam"))},
 "/admin/members/{id}": {
    "patch": admin("Change a member's role (owners; the last owner stays one)", params=[p("id", UUIDS)],
        req=body(obj({"role": ROLE}, ["role"])), schema=ref("ConsoleMember")),
    "delete": admin("Remove a member: their console sessions end, refused everywhere within OPERATOR_CACHE_SECONDS", ok="204", params=[p("id", UUIDS)])},
 "/admin/invites": {"post": admin("Invite someone to the team by e-mail: a single-use link valid 72 h (owners)", ok="201",
    req=body(obj({"email": {"type": "string", "maxLength": 254}, "role": ROLE}, ["email", "role"])),
    schema=obj({"email": S, "role": ROLE, "expires_at": DT}, ["email", "role", "expires_at"]))},
 "/admin/console-settings": {"put": admin("Require a second factor (TOTP) of every member; refused while a member has none",
    req=body(obj({"requires_totp": B}, ["requires_totp"])), schema=obj({"requires_totp": B}, ["requires_totp"]))},
 "/console/sign-in": {"post": console_op("A member signs in to the console: an access token (10 min) and the refresh cookie (HttpOnly, SameSite=Strict, "
    "path /auth/v1/console/refresh); 5 wrong passwords lock for 15 minutes", req=body(obj({"email": {"type": "string", "maxLength": 254},
    "password": {"type": "string", "maxLength": 1024}, "totp_code": {"type": "string", "maxLength": 16}}, ["email", "password"])), schema=ref("ConsoleSession"))},
 "/console/refresh": {"post": console_op("A new access token from the refresh cookie (rotated); needs X-Console-Request: 1", cookie=True, schema=ref("ConsoleSession"))},
 "/console/logout": {"post": dict(console_op("End the console session: its tokens are refused everywhere within OPERATOR_CACHE_SECONDS", cookie=True, ok="204"),
    description="Needs X-Console-Request: 1 and either the console_refresh cookie or the session's console access token as a Bearer "
                "(the browser sends the cookie only to the refresh route).")},
 "/console/me/totp/new": {"post": dict(console_op("A fresh authenticator secret for the signed-in member (not stored until a code proves it)",
    schema=obj({"totp_secret": S, "totp_uri": S}, ["totp_secret", "totp_uri"])), security=[{"appId": [], "bearer": []}])},
 "/console/me/totp": {"put": dict(console_op("Add an authenticator to the signed-in member's account, proven by a current code; 409 totp_already_enrolled",
    req=body(obj({"totp_secret": {"type": "string", "maxLength": 64}, "totp_code": {"type": "string", "maxLength": 16}}, ["totp_secret", "totp_code"])),
    schema=obj({"totp": B}, ["totp"])), security=[{"appId": [], "bearer": []}])},
 "/console/password/forgot": {"post": console_op("A forgotten password: a single-use link mailed to the member, valid one hour; the same answer whether the address "
    "is on the team or not", ok="202", req=body(obj({"email": {"type": "string", "maxLength": 254}}, ["email"])), schema=obj({"sent_if_member": B}, ["sent_if_member"]))},
 "/console/password/reset": {"post": console_op("A new password from the mailed link: the link works once, every session of the member ends, the lockout is cleared",
    ok="204", app=False, req=body(obj({"token": {"type": "string", "maxLength": 128}, "password": {"type": "string", "maxLength": 1024}}, ["token", "password"])))},
 "/console/invites/preview": {"post": console_op("What an invite is for, and a second factor to enrol with (the token from the mailed link)",
    req=body(obj({"token": {"type": "string", "maxLength": 128}}, ["token"])), schema=ref("ConsoleInvite"), app=False)},
 "/console/invites/accept": {"post": console_op("Accept an invite: the member's password, and their authenticator's secret with a current code "
    "(required when the app requires it); the link works once", ok="201", app=False,
    req=body(obj({"token": {"type": "string", "maxLength": 128}, "password": {"type": "string", "maxLength": 1024},
                  "totp_secret": {"type": "string", "maxLength": 64}, "totp_code": {"type": "string", "maxLength": 16}}, ["token", "password"])),
    schema=ref("ConsoleMember"))},
 "/live/tickets": {"post": aop("A single-use ticket (60 s) for a client that cannot set headers on a WebSocket: ?ticket= on /live/events or /live/socket",
    ok="201", schema=obj({"ticket": S, "expires_in": I}, ["ticket", "expires_in"]))},
 "/live/events": {"get": live_op("The user's own live events as Server-Sent Events (id: cursor, event: type, data: a LiveEvent); "
    "a state.snapshot first, or every event after Last-Event-ID / ?after=; a comment every 20 s", sse=True)},
 "/live/socket": {"get": live_op("The same events over a WebSocket (RFC 6455): each text frame a LiveEvent with its cursor; a ping every 20 s; "
    "closed with 4001 (session revoked), 4003 (account deleted), 4008 (replaced), 1012 (replica stopping)", sse=False)},
 "/.well-known/jwks.json": {"get": dict(op("Public keys of the access tokens", schema=obj({"keys": arr(obj({"kty": S, "crv": S, "x": S, "kid": S, "alg": S, "use": S},
    ["kty", "kid"]))}, ["keys"])), security=[])},
 "/.well-known/openid-configuration": {"get": dict(op("Discovery: the tokens' issuer (AUTH_ISSUER), jwks_uri and algorithms, for a JWT verifier",
    schema=obj({"issuer": S, "jwks_uri": S, "id_token_signing_alg_values_supported": arr(S), "claims_supported": arr(S),
                "response_types_supported": arr(S), "subject_types_supported": arr(S), "token_endpoint_auth_methods_supported": arr(S)},
               ["issuer", "jwks_uri", "id_token_signing_alg_values_supported"])), security=[])},
}
sub = {
 "/plans": {"get": aop("The app's plans", schema=obj({"plans": arr(ref("Plan"))}, ["plans"]))},
 "/subscriptions/purchase": {"post": purchase_op("Verify a store purchase: 201 when it starts a subscription, 200 when it was already known")},
 "/subscriptions/restore": {"post": purchase_op("Restore purchases: 201 when a subscription is found anew, 200 when it was already known")},
 "/subscriptions/me": {"get": aop("The user's subscription", schema=ref("SubscriptionStatus"))},
 "/subscriptions/cancel": {"post": aop("Cancel (access lasts to the period end)", schema=obj({"subscription": ref("Subscription"), "manage_url": S,
    "access_until": DT, "message": S}, ["subscription", "access_until"]))},
 "/content/{id}": {"get": aop("A content's access level and the user's access", params=[p("id")], schema=obj({
    "content": obj({"content_id": S, "access_level": {"type": "string", "enum": ["free", "freemium", "premium"]}}, ["content_id", "access_level"]),
    "has_access": B, "via": S, "unlocked_until": DT, "unlock_options": obj({
        "via_subscription": obj({"available": B, "plans": arr(ref("Plan"))}, ["available", "plans"]),
        "via_credits": obj({"cost": I, "duration_hours": I, "user_can_afford": B, "user_balance": I}, ["cost", "duration_hours", "user_can_afford", "user_balance"])})},
    ["content", "has_access"]))},
 "/content/{id}/check-access": {"post": aop("Check and log access", params=[p("id"), {"name": "X-Device-ID", "in": "header", "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[A-Za-z0-9._:-]+$"}}], schema=ref("CheckAccessResult"))},
 "/content/{id}/unlock": {"post": aop("Unlock freemium content with credits", params=[p("id")], schema=ref("UnlockResult"))},
 "/credits/balance": {"get": aop("Credit balance", schema=ref("CreditBalance"))},
 "/credits/transactions": {"get": aop("Credit history", params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 100}), q("before", I)], schema=ref("CreditPage"))},
 "/webhooks/apple": {"post": dict(aop("App Store Server Notifications (v2 signed, v1 shared secret)",
    req=body({"type": "object", "properties": {"signedPayload": {"type": "string", "description": "v2: the notification, signed by Apple (JWS)"}},
              "additionalProperties": {"description": "v1: the notification's fields (notification_type, password, unified_receipt, …)"}}),
    schema=ref("NotificationReceipt")), security=[])},
 "/webhooks/google": {"post": dict(aop("Google Play real-time notifications (Pub/Sub push)", params=[q("token", S)],
    req=body(obj({"message": obj({"data": {"type": "string", "description": "The developer notification, base64"}, "messageId": S}, ["data", "messageId"]),
                  "subscription": S}, ["message"])), schema=ref("NotificationReceipt")), security=[])},
 "/admin/stores": {"get": admin("The app's store settings (secrets never shown)", schema=obj({"stores": arr(obj({
    "store": {"type": "string", "enum": ["apple", "google"]},
    "settings": obj({"bundle_id": S, "environment": S, "root_certificates_der_base64": arr(S), "allow_local_environments": B,
                     "package_name": S, "service_account_email": S}),
    "has_secret": dict(B, description="A shared secret or private key is stored (never shown)"), "version": I, "updated_at": DT},
    ["store", "settings", "has_secret", "version", "updated_at"]))}, ["stores"]))},
 "/admin/stores/{store}": {
    "put": admin("Set the app's Apple or Google Play settings: apple takes bundle_id and environment, google package_name, "
        "service_account_email and private_key_pem", req=body(obj({"bundle_id": S, "environment": {"type": "string", "enum": ["Production", "Sandbox", "Xcode", "LocalTesting"]},
        "root_certificates_der_base64": arr(S), "allow_local_environments": B, "shared_secret": S,
        "package_name": S, "service_account_email": S, "private_key_pem": S})), params=[p("store", {"type": "string", "enum": ["apple", "google"]})],
        schema=obj({"store": S, "version": I}, ["store", "version"])),
    "delete": admin("Remove the app's settings for a store", ok="204", params=[p("store", {"type": "string", "enum": ["apple", "google"]})])},
 "/admin/plans": {"get": admin("The app's plans as it sells them (the console's Subscriptions page)", schema=obj({"plans": arr(ref("Plan"))}, ["plans"]))},
 "/admin/store-events": {"get": admin("The store notifications the app received, newest first, and what each did",
    params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 100}),
            q("before", {"type": "string", "maxLength": 64, "description": "The next_before of the previous page"})],
    schema=obj({"events": arr(obj({"id": UUIDS, "store": {"type": "string", "enum": ["apple", "google"]}, "notification_type": S,
        "subtype": {"type": ["string", "null"]}, "original_transaction_id": {"type": ["string", "null"]}, "received_at": DT,
        "result": dict(S, description="What it did: applied, duplicate, ignored, unknown_subscription, …")},
        ["id", "store", "notification_type", "received_at", "result"])), "next_before": {"type": ["string", "null"]}}, ["events"]))},
 "/admin/users/{id}/credits": {
    "get": admin("A user's balance and recent credits (support)", params=[p("id", UUIDS)],
        schema=obj({"balance": I, "transactions": arr(ref("CreditTransaction"))}, ["balance", "transactions"])),
    "post": admin("Grant or take credits (support; idempotent on the ticket)", ok="201", params=[p("id", UUIDS), IDEMPOTENCY_KEY],
        req=body(obj({"amount": {"type": "integer", "minimum": -100000, "maximum": 100000, "description": "Credits to grant (positive) or take (negative), never 0"}, "reason": REASON}, ["amount", "reason"])),
        schema=obj({"transaction": ref("CreditTransaction"), "balance": I, "replayed": B}, ["transaction", "balance", "replayed"]))},
 "/admin/users/{id}/premium": {
    "post": admin("Grant premium for a period (support)", ok="201", params=[p("id", UUIDS), IDEMPOTENCY_KEY],
        req=body(obj({"days": {"type": "integer", "minimum": 1, "maximum": 366}, "reason": REASON}, ["days", "reason"])),
        schema=obj({"subscription_id": UUIDS, "valid_until": DT, "replayed": B}, ["subscription_id", "replayed"])),
    "delete": admin("End a support grant of premium", params=[p("id", UUIDS)], req=body(obj({"reason": REASON}, ["reason"])),
        schema=obj({"ended": arr(UUIDS)}, ["ended"]))},
}
# #47 every service's own operator audit, as the console's Audit page reads it.
named("OperatorAuditEntry", obj({"id": I, "at": DT, "operator": dict(S, description="platform, operator_key:<id>:<name> or member:<id>:<email>"),
    "method": S, "route": S, "path": S, "status": I, "request_id": {"type": ["string", "null"]}}, ["id", "at", "operator", "method", "route", "path", "status"]))
for _paths in (auth, sub, off, ads):
    _paths["/admin/audit"] = {"get": admin("This service's operator audit for the app, newest first (viewer and up)",
        params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 200}), q("before", {"type": "integer", "minimum": 1}),
                q("operator", {"type": "string", "maxLength": 400, "description": "One operator, or a kind of them with a trailing colon (member:)"})],
        schema=obj({"entries": arr(ref("OperatorAuditEntry")), "next_before": {"type": ["integer", "null"]}}, ["entries"]))}
for o in (sub["/admin/users/{id}/credits"]["post"], sub["/admin/users/{id}/premium"]["post"]):
    o["responses"]["200"] = with_headers({"200": {"description": "The same request again (replayed)", "content": o["responses"]["201"]["content"]}})["200"]
import os
root = os.path.dirname(os.path.abspath(__file__)) + "/../.."
for name, title, prefix, paths in [("Auth", "Auth service", "/auth/v1", auth), ("Subscription", "Subscription service", "/subscription/v1", sub),
                                   ("Offline", "Offline & geolocation service", "/offline/v1", off), ("Ads", "Ads & freemium service", "/ads/v1", ads)]:
    d = document(title, prefix, paths, service=prefix.split("/")[1])
    out = f"{root}/Services/{name}/Sources/OpenAPI/openapi.json"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    # Keys in declaration order: a generated client's initializers take fields in the order a reader meets them.
    json.dump(d, open(out, "w"), indent=1)
    print(name, len(d["paths"]), "paths")

"""Writes each service's OpenAPI 3.1 document (Services/<Name>/Sources/OpenAPI/openapi.json).
Run from anywhere: python3 deploy/local/openapi_gen.py. The documents are committed; edit here."""
import json, sys
from error_codes import codes as error_codes

def err(desc): return {"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
ERRS = {"400": "Malformed input (the field is named)", "401": "Missing or invalid tenant headers or token", "403": "Not allowed",
        "404": "Unknown resource", "409": "Conflicting state", "410": "Gone", "413": "Body too large", "415": "Content-Type must be application/json",
        "422": "Invalid value (the field is named)", "429": "Limit reached (retry_after)", "502": "Upstream refused", "503": "A dependency is unavailable",
        "507": "Not enough offline storage"}
def responses(ok, okdesc, extra, schema=None):
    r = {ok: {"description": okdesc, "content": {"application/json": {"schema": schema or {"type": "object"}}}}}
    for c in ["400", "401", "404", "413", "415", "422", "429", "503"] + extra:
        r[c] = err(ERRS[c])
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
               "schemas": {"Error": obj({"error": {"type": "string", "enum": list(error_codes(service)),
                                                    "description": "The code an app switches on: docs/ERRORS.md lists each with its meaning"},
                                         "message": S, "request_id": S, "field": S}, ["error", "message"])}},
           "security": [{"appId": [], "apiKey": [], "bearer": []}],
           "paths": {}}
    for path, ops in paths.items():
        for method, o in ops.items():
            o.setdefault("operationId", operation_id(method, path))
        doc["paths"][prefix + path] = ops
    ids = [o["operationId"] for ops in doc["paths"].values() for o in ops.values()]
    assert len(ids) == len(set(ids)), f"{title}: duplicate operationIds"
    return doc

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

VARIANTS = {"type": "array", "minItems": 2, "maxItems": 10, "items": obj({"key": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,32}$"},
    "weight": {"type": "integer", "minimum": 0, "maximum": 100}, "reward": obj({"type": S, "amount": {"type": "integer", "minimum": 1, "maximum": 1000}}, ["amount"]),
    "conditions": {"type": "object"}, "holdout": B}, ["key", "weight"])}
ads = {
 "/ads/available": {"get": op("Whether an ad can be shown now (UC-ADS-4.1 step 3, 4.2 step 5)",
    params=[q("ad_type", {"type": "string", "enum": ["rewarded", "interstitial"]}, True), q("placement", S), q("country", S)],
    schema=obj({"available": B, "reason": {"type": ["string", "null"]}, "cooldown_seconds": {"type": ["integer", "null"]},
                "next_available_at": {"type": ["string", "null"]}}, ["available", "reason", "cooldown_seconds", "next_available_at"]))},
 "/ads/request": {"post": op("Request an ad: provider by priority, unit id", ok="201", okdesc="Created", extra=["403"],
    req=body(obj({"ad_type": {"type": "string", "enum": ["rewarded", "interstitial"]}, "placement": S, "provider_preference": S}, ["ad_type"])),
    schema=obj({"ad_request_id": UUIDS, "provider": S, "ad_unit_id": S, "can_show": B, "test_mode": B, "personalized": B,
                "ad_duration_seconds": I, "server_side_verification": B}, ["ad_request_id", "provider", "ad_unit_id", "can_show", "test_mode"]))},
 "/ads/{id}/impression": {"post": op("Record load/show", params=[p("id", UUIDS)],
    req=body(obj({"loaded": B, "shown": B, "load_time_ms": I, "error": S}, ["loaded", "shown"])), schema=obj({"recorded": B}, ["recorded"]))},
 "/ads/{id}/complete": {"post": op("Complete a view (after its impression: 409 ad_not_shown otherwise); a rewarded view may earn 1 credit", params=[p("id", UUIDS)], extra=["409", "410"],
    req=body(obj({"completed": B, "clicked": B, "display_duration_ms": I, "revenue_usd": N}, ["completed", "display_duration_ms"])),
    schema=obj({"ad_request_id": UUIDS, "ad_type": S, "completed": B, "reward_granted": B, "new_balance": I, "reward_status": S,
                "reason": S, "cooldown_seconds": I}, ["ad_request_id", "reward_granted"]))},
 "/ads/ssv/admob": {"get": dict(op("AdMob server-side verification callback (signed query)", extra=["403"],
    params=[q("transaction_id", S), q("custom_data", S), q("signature", S), q("key_id", S)], schema=obj({"status": S}, ["status"])), security=[])},
 "/ads/consent": {
    "get": op("The current ad consent and whether GDPR applies", params=[q("country", S)],
        schema=obj({"consent": {"type": ["object", "null"]}, "required": B, "gdpr_applies": B, "ads_enabled": B}, ["consent", "required", "gdpr_applies"])),
    "post": op("Record a consent change (GDPR, COPPA, ATT, TCF); under 13 sticks until a birth_date says 13+", extra=["403"],
        req=body(obj({"consent_personalized_ads": B, "consent_data_sharing": B, "birth_date": {"type": "string", "format": "date"},
        "age_gate_passed": B, "is_under_age": B, "att_status": {"type": "string", "enum": ["authorized", "denied", "restricted", "not_determined"]},
        "tcf_string": S, "consent_form_status": {"type": "string", "enum": ["obtained", "required", "not_required", "unknown"]}, "country": S})),
        schema=obj({"consent": {"type": ["object", "null"]}, "ads_enabled": B}, ["consent", "ads_enabled"]))},
 "/campaigns/active": {"get": op("Running campaigns with the user's progress", schema=obj({"campaigns": {"type": "array"}}, ["campaigns"]))},
 "/campaigns/{id}": {
    "get": op("A campaign with the user's progress", params=[p("id", UUIDS)], schema=obj({"id": UUIDS, "progress": {"type": "object"}}, ["id", "progress"])),
    "post": op("Progress as the server counted it (a streak campaign records today's check-in)", params=[p("id", UUIDS)],
        schema=obj({"campaign_id": UUIDS, "progress": I, "completed": B, "can_claim_reward": B}, ["campaign_id", "progress", "completed"]))},
 "/campaigns/{id}/claim-reward": {"post": op("Claim a completed campaign's credits once", params=[p("id", UUIDS)],
    schema=obj({"claimed": B, "reward": {"type": "object"}, "reward_status": S}, ["claimed", "reward"]))},
 "/referral/code": {"get": op("The user's referral code", schema=obj({"code": S}, ["code"]))},
 "/referral/redeem": {"post": op("Redeem another user's referral code", extra=["409"], req=body(obj({"code": S}, ["code"])), schema=obj({"redeemed": B}, ["redeemed"]))},
 "/admin/providers": {"get": op("Ad providers (admin token)", schema=obj({"providers": {"type": "array"}}, ["providers"]))},
 "/admin/providers/{name}": {"put": op("Create or update an ad provider (admin token)", params=[p("name", {"type": "string", "pattern": "^[a-z0-9_]{1,40}$"})],
    req=body(obj({"priority": I, "active": B, "rewarded_unit_id": S, "interstitial_unit_id": S, "banner_unit_id": S, "ad_duration_seconds": I,
                  "verification": {"type": "string", "enum": ["client", "ssv"]}, "test_mode": B, "ecpm_estimate_usd": N})))},
 "/admin/campaigns": {"post": op("Create a campaign (admin token)", ok="201", okdesc="Created", req=body(obj({"name": S, "description": S,
    "campaign_type": {"type": "string", "enum": ["watch_ads", "streak_bonus", "referral"]}, "reward": obj({"type": S, "amount": I}, ["amount"]),
    "conditions": {"type": "object"}, "starts_at": {"type": "string", "format": "date-time"}, "ends_at": {"type": "string", "format": "date-time"},
    "variants": VARIANTS}, ["name", "campaign_type", "reward", "conditions", "ends_at"])))},
 "/admin/campaigns/{id}": {"patch": op("Edit a campaign (admin token): name, description, end, the variants' weights, rewards and goals; "
    "a variant with assigned users cannot be removed (409 variant_has_users)", params=[p("id", UUIDS)], extra=["409"],
    req=body(obj({"name": S, "description": S, "ends_at": {"type": "string", "format": "date-time"}, "variants": VARIANTS})))},
 "/admin/campaigns/{id}/results": {"get": op("An experiment's results per variant (admin token): funnel, completion rate, difference vs the first "
    "variant with its 95% CI and p-value, sample-ratio check, by day; ?format=csv", params=[p("id", UUIDS), q("format", {"type": "string", "enum": ["json", "csv"]})],
    schema=obj({"campaign_id": UUIDS, "variants": {"type": "array"}, "by_day": {"type": "array"}, "warnings": {"type": "array"}},
               ["campaign_id", "variants", "by_day", "warnings"]))},
 "/admin/campaigns/{id}/end": {"post": op("End a campaign now (admin token)", params=[p("id", UUIDS)])},
 "/analytics/revenue": {"get": dict(op("Revenue report from daily aggregates (admin token); ?format=csv for the export",
    params=[q("start_date", {"type": "string", "format": "date"}), q("end_date", {"type": "string", "format": "date"}),
            q("ad_type", {"type": "string", "enum": ["rewarded", "interstitial"]}), q("provider", S), q("placement", S),
            q("format", {"type": "string", "enum": ["json", "csv"]})]))},
 "/analytics/dashboard": {"get": {"summary": "HTML revenue dashboard (admin token)", "parameters": [q("start_date", {"type": "string", "format": "date"}),
    q("end_date", {"type": "string", "format": "date"})], "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": S}}},
    **{c: err(ERRS[c]) for c in ["400", "401", "422", "429", "503"]}}}},
 "/analytics/refresh": {"post": op("Refresh the daily aggregates now (admin token)")},
}
rev = ads["/analytics/revenue"]["get"]["responses"]["200"]["content"]; rev["text/csv"] = {"schema": S}
ads["/admin/campaigns/{id}/results"]["get"]["responses"]["200"]["content"]["text/csv"] = {"schema": S}

off = {
 "/sync/profile": {"get": op("Sync profile, categories and storage", schema=obj({"profile": {"type": "object"}, "storage": {"type": "object"},
        "limits": {"type": "object"}, "categories": {"type": "array"}}, ["profile", "storage", "limits", "categories"])),
    "patch": op("Change sync settings", extra=["403"], req=body(obj({"auto_sync_enabled": B, "sync_on_wifi_only": B, "sync_frequency_hours": I,
        "conflict_strategy": {"type": "string", "enum": ["server_wins", "local_wins", "manual"]}})), schema=obj({"profile": {"type": "object"}}, ["profile"]))},
 "/categories/download": {"post": op("Start a download job (limits checked first)", ok="202", okdesc="Accepted", extra=["403", "507"],
    req=body(obj({"category_ids": {"type": "array", "items": S}}, ["category_ids"])),
    schema=obj({"job_id": UUIDS, "estimated_size_mb": N, "estimated_time_seconds": I}, ["job_id", "estimated_size_mb", "estimated_time_seconds"]))},
 "/categories/download/{job}": {"get": op("Download progress", params=[p("job", UUIDS)],
    schema=obj({"job_id": UUIDS, "status": S, "progress": I, "downloaded_count": I, "total_count": I}, ["status", "progress", "downloaded_count", "total_count"]))},
 "/categories/download/{job}/pause": {"post": op("Pause a download", extra=["409"], params=[p("job", UUIDS)])},
 "/categories/download/{job}/resume": {"post": op("Resume a paused download", extra=["409"], params=[p("job", UUIDS)])},
 "/categories/downloaded": {"get": op("The user's offline categories", schema=obj({"categories": {"type": "array"}}, ["categories"]))},
 "/categories/{id}/items": {"get": op("The pack (paged; base64 data, encoding, SHA-256 checksum)", params=[p("id"), q("after", S), q("limit", I)],
    schema=obj({"items": {"type": "array"}}, ["items"]))},
 "/categories/{id}/check-updates": {"get": op("Changes since a cursor", params=[p("id"), q("cursor", I)],
    schema=obj({"added": I, "updated": I, "deleted": I, "next_cursor": I, "full_download_required": B}, ["added", "updated", "deleted", "next_cursor"]))},
 "/categories/{id}/refresh": {"post": op("Apply the changes to the copy", extra=["409"], params=[p("id")],
    schema=obj({"updated": B, "changes": {"type": "object"}}, ["updated", "changes"]))},
 "/categories/{id}": {"delete": op("Delete a category from the copy", extra=["409"], params=[p("id"), q("force", S)],
    schema=obj({"deleted": B, "space_freed_mb": N}, ["deleted", "space_freed_mb"]))},
 "/categories": {"delete": op("Delete the whole copy", extra=["409"], params=[q("force", S)], schema=obj({"deleted": B, "space_freed_mb": N}, ["deleted"]))},
 "/storage/suggestions": {"get": op("What to free", schema=obj({"suggestions": {"type": "array"}, "freeable_mb": N}, ["suggestions"]))},
 "/sync/queue": {"post": op("Queue an offline action (idempotent on client_action_id); a guest has no cloud save (403)", ok="201", okdesc="Created", extra=["403"],
    req=body(obj({"client_action_id": S, "action_type": S, "entity_type": S, "entity_id": S, "category_id": S, "payload": {"type": "object"},
                  "priority": I}, ["client_action_id", "action_type", "entity_type", "entity_id", "payload"])),
    schema=obj({"queue_item": {"type": "object"}, "position": I}, ["queue_item", "position"])),
    "get": op("The user's queued actions", schema=obj({"actions": {"type": "array"}}, ["actions"]))},
 "/sync/execute": {"post": op("Send the queue (not for guests: 403)", ok="202", okdesc="Accepted", extra=["403"], schema=obj({"job_id": UUIDS, "items_to_process": I}, ["job_id", "items_to_process"]))},
 "/sync/execute/{job}": {"get": op("Sync job progress", params=[p("job", UUIDS)], schema=obj({"job_id": UUIDS, "status": S}, ["job_id", "status"]))},
 "/sync/conflicts": {"get": op("Open conflicts", schema=obj({"conflicts": {"type": "array"}}, ["conflicts"]))},
 "/sync/conflicts/{id}/resolve": {"post": op("Resolve a conflict", extra=["409", "502"], params=[p("id", UUIDS)],
    req=body(obj({"resolution": {"type": "string", "enum": ["local_wins", "server_wins", "merge", "skip"]},
                  "merge_data": {"type": "object", "additionalProperties": {"type": "string", "enum": ["local", "server"]}}}, ["resolution"])),
    schema=obj({"resolved": B, "resolution": S}, ["resolved", "resolution"]))},
 "/location/update": {"post": op("Record the user's location (consent, 15 min, accuracy <= 1 km)", ok="201", okdesc="Created", extra=["403"],
    req=body(obj({"latitude": N, "longitude": N, "accuracy": N, "altitude": N, "source": {"type": "string", "enum": ["gps", "wifi", "cell", "ip"]},
                  "consent_given": B}, ["latitude", "longitude", "accuracy", "consent_given"])), schema=obj({"location": {"type": "object"}}, ["location"]))},
 "/location/nearby-content": {"get": op("Place-based content near the last location", extra=["409"], params=[q("radius_km", N)],
    schema=obj({"content": {"type": "array"}}, ["content"]))},
 "/admin/categories/{id}": {"put": op("Create or update a category (admin token)", params=[p("id")], req=body(obj({"name": S, "description": S}, ["name"])))},
 "/admin/categories/{id}/items": {"post": op("Upsert or delete items, 1,000 per batch (admin token)", params=[p("id")],
    req=body(obj({"upsert": {"type": "array", "items": obj({"id": S, "data": {"type": "object"}}, ["id", "data"])}, "delete": {"type": "array", "items": S}})))},
 "/admin/location-content/{id}": {"put": op("Create or update place-based content (admin token)", params=[p("id")],
    req=body(obj({"title": S, "content_type": S, "latitude": N, "longitude": N, "metadata": {"type": "object"},
                  "available_until": {"type": "string", "format": "date-time"}, "active": B}, ["title", "latitude", "longitude"])))},
}
ERRS.update({"402": "Not enough credits"})
BROAD = ["403", "409", "410", "402", "502"]
DEV = obj({"device_id": S, "platform": S, "app_version": S, "os_version": S})
CREDS = obj({"email": S, "password": S, "google_id_token": S, "apple_identity_token": S, "apple_authorization_code": S, "nonce": S,
             "device_id": S, "guest_secret": S, "user_info": obj({"first_name": S, "last_name": S, "email": S})})
AUTHREQ = body(obj({"provider": {"type": "string", "enum": ["email", "google", "apple", "guest"]}, "credentials": CREDS, "device_info": DEV},
                   ["provider", "credentials"]))
TOKENS = obj({"user": {"type": "object"}, "tokens": {"type": "object"}}, ["tokens"])
def aop(summary, ok="200", req=None, params=(), schema=None, public=False):
    o = op(summary, ok=ok, extra=BROAD, params=params, req=req, schema=schema)
    if public: o["security"] = [{"appId": [], "apiKey": []}]
    return o
def creates_on_first_use(o):
    # A first sign-in with a guest device, Google or Apple makes the account: 201 then, 200 after.
    o["responses"]["201"] = {"description": "Created: the account was made by this first sign-in",
                             "content": {"application/json": {"schema": TOKENS}}}
    return o
auth = {
 "/auth/register": {"post": aop("Create an account (email, google, apple, guest)", ok="201", req=AUTHREQ, schema=TOKENS, public=True)},
 "/auth/login": {"post": creates_on_first_use(aop("Sign in (creates the account on a first guest, Google or Apple sign-in)",
                                                  req=AUTHREQ, schema=TOKENS, public=True))},
 "/auth/refresh": {"post": aop("Rotate a refresh token", req=body(obj({"refresh_token": S}, ["refresh_token"])), public=True)},
 "/auth/logout": {"post": aop("Sign out this device or all (its push token goes too)", req=body(obj({"refresh_token": S, "all": B})))},
 "/auth/push-tokens": {
    "get": aop("The user's devices registered for push (a token shown by its last 8 characters)", schema=obj({"devices": {"type": "array"}}, ["devices"])),
    "put": aop("Register or move a device's push token (one token, one user; at most 20 devices: 422 too_many_devices)",
        req=body(obj({"device_id": {"type": "string", "minLength": 1, "maxLength": 200}, "platform": {"type": "string", "enum": ["ios", "android"]},
                      "token": S, "environment": {"type": "string", "enum": ["sandbox", "production"]}, "locale": {"type": "string", "enum": ["fr", "en"]}},
                     ["device_id", "platform", "token"])),
        schema=obj({"device_id": S, "platform": S, "environment": S, "locale": {"type": ["string", "null"]}, "token_suffix": S}, ["device_id", "platform", "token_suffix"]))},
 "/auth/push-tokens/{device_id}": {"delete": aop("Remove a device's push token", params=[p("device_id", {"type": "string", "minLength": 1, "maxLength": 200})],
    schema=obj({"removed": B}, ["removed"]))},
 "/auth/me": {"get": aop("The signed-in user", schema=obj({"user": {"type": "object"}}, ["user"])),
              "delete": aop("Schedule the account's deletion (J+30)", ok="202", req={"required": False, "content": {"application/json": {"schema": obj({"reason": S})}}})},
 "/auth/deletion/cancel": {"post": aop("Cancel a scheduled deletion", req=body(obj({"token": S}, ["token"])), public=True)},
 "/auth/verify-email": {"post": aop("Verify an email address", req=body(obj({"token": S}, ["token"])), public=True)},
 "/auth/verify-email/resend": {"post": aop("Send the verification email again")},
 "/auth/password/forgot": {"post": aop("Start a password reset (same answer whether or not the address exists)", req=body(obj({"email": S}, ["email"])), public=True)},
 "/auth/password/reset": {"post": aop("Reset the password", req=body(obj({"token": S, "new_password": S}, ["token", "new_password"])), public=True)},
 "/auth/otp/send": {"post": aop("Send a sign-in code by email", req=body(obj({"email": S}, ["email"])), public=True)},
 "/auth/otp/verify": {"post": aop("Sign in with the emailed code", req=body(obj({"email": S, "code": S, "device_info": DEV}, ["email", "code"])), public=True)},
 "/auth/link": {"post": aop("Link another sign-in method", req=AUTHREQ, schema=TOKENS)},
 "/auth/link/{provider}": {"delete": aop("Unlink a sign-in method", params=[p("provider", {"type": "string", "enum": ["email", "google", "apple"]})])},
 "/auth/game-center/link": {"post": aop("Link Game Center (signature checked against Apple's certificate)", req=body(obj({"player_id": S, "alias": S,
    "public_key_url": S, "signature": S, "salt": S, "timestamp": I, "achievements": {"type": "array"}, "leaderboard_score": I},
    ["player_id", "public_key_url", "signature", "salt", "timestamp"])))},
 "/auth/game-center/sync": {"post": aop("Merge Game Center progress", req=body(obj({"achievements": {"type": "array"}, "leaderboard_score": I})))},
 "/auth/game-center/unlink": {"post": aop("Unlink Game Center")},
 "/auth/privacy": {"get": aop("Privacy settings", schema=obj({"privacy": {"type": "object"}}, ["privacy"])),
                   "patch": aop("Change consents", req=body(obj({"consent_analytics": B, "consent_third_party": B, "consent_geolocation": B,
                        "consent_personalized_ads": B, "consent_notifications": B, "consent_game_center": B})))},
 "/auth/privacy/export": {"post": aop("Request a data export", ok="202")},
 "/auth/privacy/export/{id}": {"get": aop("An export's status", params=[p("id", UUIDS)])},
 "/.well-known/jwks.json": {"get": dict(op("Public keys of the access tokens", schema=obj({"keys": {"type": "array"}}, ["keys"])), security=[])},
 "/.well-known/openid-configuration": {"get": dict(op("Discovery: the tokens' issuer (AUTH_ISSUER), jwks_uri and algorithms, for a JWT verifier",
    schema=obj({"issuer": S, "jwks_uri": S, "id_token_signing_alg_values_supported": {"type": "array", "items": S}},
               ["issuer", "jwks_uri", "id_token_signing_alg_values_supported"])), security=[])},
}
sub = {
 "/plans": {"get": aop("The app's plans", schema=obj({"plans": {"type": "array"}}, ["plans"]))},
 "/subscriptions/purchase": {"post": aop("Verify a store purchase", req=body(obj({"store": {"type": "string", "enum": ["apple", "google"]},
    "signed_transaction": S, "receipt_data": S, "plan_id": UUIDS, "purchase_token": S, "product_id": S}, ["store"])))},
 "/subscriptions/restore": {"post": aop("Restore purchases", req=body(obj({"store": {"type": "string", "enum": ["apple", "google"]},
    "signed_transaction": S, "receipt_data": S, "plan_id": UUIDS, "purchase_token": S, "product_id": S}, ["store"])))},
 "/subscriptions/me": {"get": aop("The user's subscription", schema=obj({"subscription": {"type": ["object", "null"]}, "is_premium": B}, ["is_premium"]))},
 "/subscriptions/cancel": {"post": aop("Cancel (access lasts to the period end)")},
 "/content/{id}": {"get": aop("A content's access level and the user's access", params=[p("id")])},
 "/content/{id}/check-access": {"post": aop("Check and log access", params=[p("id"), {"name": "X-Device-ID", "in": "header", "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[A-Za-z0-9._:-]+$"}}])},
 "/content/{id}/unlock": {"post": aop("Unlock freemium content with credits", params=[p("id")])},
 "/credits/balance": {"get": aop("Credit balance", schema=obj({"balance": I}, ["balance"]))},
 "/credits/transactions": {"get": aop("Credit history", params=[q("limit", I), q("before", I)], schema=obj({"transactions": {"type": "array"}}, ["transactions"]))},
 "/webhooks/apple": {"post": dict(aop("App Store Server Notifications (v2 signed, v1 shared secret)", req=body({"type": "object"})), security=[])},
 "/webhooks/google": {"post": dict(aop("Google Play real-time notifications (Pub/Sub push)", params=[q("token", S)], req=body({"type": "object"})), security=[])},
}
import os
root = os.path.dirname(os.path.abspath(__file__)) + "/../.."
for name, title, prefix, paths in [("Auth", "Auth service", "/auth/v1", auth), ("Subscription", "Subscription service", "/subscription/v1", sub),
                                   ("Offline", "Offline & geolocation service", "/offline/v1", off), ("Ads", "Ads & freemium service", "/ads/v1", ads)]:
    d = document(title, prefix, paths, service=prefix.split("/")[1])
    out = f"{root}/Services/{name}/Sources/OpenAPI/openapi.json"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    json.dump(d, open(out, "w"), indent=1, sort_keys=True)
    print(name, len(d["paths"]), "paths")

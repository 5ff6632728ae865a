"""The error codes each service can answer (#32, #36): the service's catalogue
(`Services/<Name>/Sources/Domain/<Name>Errors.swift`, an enum of codes with their status and
meaning), every `AppError(.status, "code", "message")` of ServiceKit (and a service's own use of
a shared code), ServiceKit's helpers and its fallback per status, and the gateway's own refusals. openapi_gen.py puts them in
each document's `Error` schema as an enum; `python3 deploy/local/error_codes.py` writes the
catalogue (docs/ERRORS.md) that the README links to. A code answered but named nowhere here makes
schemathesis fail the contract run (response_schema_conformance)."""
import glob
import os
import re

ROOT = os.path.dirname(os.path.abspath(__file__)) + "/../.."
CALL = re.compile(r'AppError\(\s*\.([A-Za-z]+)(?:\(code: (\d+)[^)]*\))?\s*,\s*"([a-z_]+)"\s*,\s*("(?:[^"\\]|\\.)*")?', re.S)
STATUS = {"badRequest": 400, "unauthorized": 401, "forbidden": 403, "notFound": 404, "methodNotAllowed": 405, "conflict": 409,
          "gone": 410, "contentTooLarge": 413, "unsupportedMediaType": 415, "unprocessableContent": 422, "locked": 423,
          "tooManyRequests": 429, "internalServerError": 500, "badGateway": 502, "serviceUnavailable": 503, "gatewayTimeout": 504,
          "insufficientStorage": 507, "preconditionFailed": 412}
# ServiceKit's helpers and its fallback code per status (ErrorResponder.code(for:)).
HELPERS = {"invalid_request": (400, "Malformed input; `field` names it"), "validation_error": (422, "A value is out of its range or shape; `field` names it"),
           "not_found": (404, "No such resource (or not in this app)"), "unauthorized": (401, "Authentication required"),
           "invalid_token": (401, "The access token is missing, expired, forged or for another app"),
           "rate_limit_exceeded": (429, "Too many requests; retry after `retry_after` seconds"),
           "service_unavailable": (503, "A dependency is unavailable; retry"), "forbidden": (403, "Not allowed"),
           "method_not_allowed": (405, "Method not allowed on this path"), "request_timeout": (408, "The request took too long"),
           "conflict": (409, "Conflicting state"), "payload_too_large": (413, "The body exceeds 1 MiB"),
           "unsupported_media_type": (415, "Content-Type must be application/json"), "internal_error": (500, "An unexpected error; the request id finds it in the logs"),
           "http_error": (400, "An HTTP-level refusal"),
           "user_erased": (410, "Internal calls: the user's data has been erased, and this is final")}
# The gateway's own refusals (deploy/gateway/nginx.conf), which any route may meet.
GATEWAY = {"uri_too_long": (414, "The request URI exceeds 8 KiB (gateway)"), "headers_too_large": (431, "The request headers exceed 8 KiB (gateway)"),
           "http_version_not_supported": (505, "An HTTP version the gateway does not speak"),
           "not_implemented": (501, "A Transfer-Encoding the gateway does not implement (chunked only)")}
CATALOGUE_CASE = re.compile(r'((?:^[ \t]*///[^\n]*\n)*)^[ \t]*case\s+(\w+)\s*=\s*"([a-z_]+)"', re.M)
CATALOGUE_STATUS = re.compile(r'^[ \t]*case\s+((?:\.\w+,?\s*)+):\s*\.(?:init\(code:\s*(\d+)\)|(\w+))', re.M)


def message(literal):
    if not literal:
        return ""
    text = literal.strip('"')
    text = re.sub(r'\\\((?:[^()]|\([^()]*\))*\)', "…", text)  # interpolations
    return text.replace('\\"', '"')


def scan(paths):
    out = {}
    for path in paths:
        for f in sorted(glob.glob(path, recursive=True)):
            for m in CALL.finditer(open(f).read()):
                status = int(m.group(2)) if m.group(2) else STATUS.get(m.group(1), 400)
                out.setdefault(m.group(3), (status, message(m.group(4))))
    return out


def catalogue_path(service):
    name = service.capitalize()
    return f"{ROOT}/Services/{name}/Sources/Domain/{name}Errors.swift"


def catalogue(service):
    """code -> (status, meaning, case name) as the service's catalogue declares them."""
    text = open(catalogue_path(service)).read()
    statuses = {}
    for m in CATALOGUE_STATUS.finditer(text):
        status = int(m.group(2)) if m.group(2) else STATUS[m.group(3)]
        for name in re.findall(r"\.(\w+)", m.group(1)):
            statuses[name] = status
    out = {}
    for m in CATALOGUE_CASE.finditer(text):
        meaning = " ".join(line.strip()[3:].strip() for line in m.group(1).splitlines())
        out[m.group(3)] = (statuses[m.group(2)], meaning, m.group(2))
    return out


def codes(service):
    """code -> (status, meaning) for one service (auth, subscription, offline, ads)."""
    name = service.capitalize()
    found = scan([f"{ROOT}/Shared/ServiceKit/*.swift"])
    found.update(scan([f"{ROOT}/Services/{name}/Sources/**/*.swift"]))
    found.update({code: (status, meaning) for code, (status, meaning, _) in catalogue(service).items()})
    # The shared codes keep their general meaning (a service's own use of one is one case of it).
    found.update(HELPERS)
    found.update(GATEWAY)
    return dict(sorted(found.items()))


if __name__ == "__main__":
    lines = ["# Error codes", "",
             "Every error is the envelope `{\"error\": code, \"message\": …, \"request_id\": …}` (plus the fields a code names).",
             "These are the codes each service can answer, read from the code by `deploy/local/error_codes.py`; each OpenAPI",
             "document's `Error` schema lists the same codes as an enum. An app switches on `error`, never on `message`.", ""]
    for service in ["auth", "subscription", "offline", "ads"]:
        lines += [f"## {service}", "", "| code | status | meaning |", "|---|---|---|"]
        for code, (status, meaning) in codes(service).items():
            lines.append(f"| `{code}` | {status} | {meaning.replace('|', '/')} |")
        lines.append("")
    open(f"{ROOT}/docs/ERRORS.md", "w").write("\n".join(lines))
    print("docs/ERRORS.md:", ", ".join(f"{s} {len(codes(s))}" for s in ["auth", "subscription", "offline", "ads"]))

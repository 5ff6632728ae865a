"""`make lint` (#36): the house's rules, checked on every run of CI.
- SQL lives in Store/ (and Migrations/, and ServiceKit's plumbing): no statement text and no
  query call in a service's Routes/, Domain/, Flows/, Providers/ or App/.
- Domain/ is pure: decisions as functions of values, no PostgresNIO, no pool or connection,
  no HTTP client, no queue or outbox, nothing async.
- Every error code a service answers is in its catalogue (`<Service>Errors.swift`), and the
  catalogue is exactly what its OpenAPI document lists.
- The sources are formatted as `.swift-format` says (`swift format lint --strict`).
- Internal paths are built from their declaration in `WireTypes/InternalRoutes.swift`,
  never spelled out by hand (#50).
- A route opens no transaction: a flow owns it; the stores that still open one are counted and
  the count only goes down (#50).
- Every environment variable the code reads is explained in `.env.example`, with the code's
  default, and docs/CONFIGURATION.md is what `configuration_doc.py` writes from the two (#50).
- Rows are counted by `PostgresRows.count()`, never by a loop written again (#50).
- The types, members and files the documents name in backticks exist (#50).
- The console's security headers are the same in the gateway and in its Kubernetes pod (#47),
  and its pages hold no inline script, inline style or outside URL (the CSP would refuse them).
Prints each finding as path:line: rule, and exits 1 when there is any."""
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.dirname(os.path.abspath(__file__)) + "/../..")
os.chdir(ROOT)
sys.path.insert(0, os.path.join(ROOT, "deploy/local"))
from error_codes import scan, catalogue, catalogue_path, codes, HELPERS, GATEWAY  # noqa: E402
import configuration_doc  # noqa: E402

SQL = re.compile(r"\b(SELECT\s+[\w*(]|INSERT\s+INTO\b|UPDATE\s+[a-z_.]+\s+SET\b|DELETE\s+FROM\b|ON\s+CONFLICT\b|FOR\s+UPDATE\b"
                 r"|TRUNCATE\s+\w|(?:db|conn|connection|client)\.(?:query|run)\(|PostgresQuery\b)")
DOMAIN_IO = re.compile(r"\b(import\s+PostgresNIO|PostgresConnection|PostgresRow|DatabasePool|CurlHTTPClient|HTTPRequest|JobQueue|OutboxWriter|"
                       r"Mailer|Task\.sleep|async)\b")
findings = []


def code_lines(path):
    """The lines of a Swift file that are code (comments dropped)."""
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        stripped = line.strip()
        if stripped.startswith("//"):
            continue
        yield number, line.split(" // ")[0]


for path in sorted(glob.glob("Services/*/Sources/**/*.swift", recursive=True)):
    rooms = path.split("/")
    if "Store" in rooms or "Migrations" in rooms:
        continue
    for number, line in code_lines(path):
        if SQL.search(line):
            findings.append(f"{path}:{number}: SQL outside Store/: {line.strip()[:100]}")
        if "Domain" in rooms and DOMAIN_IO.search(line):
            findings.append(f"{path}:{number}: I/O in Domain/ ({DOMAIN_IO.search(line).group(1)}): {line.strip()[:100]}")

# #50 internal calls are typed: every `/internal/...` path is built by its declaration in
# WireTypes/InternalRoutes.swift (the caller's `path(...)`, the callee's `group.on(route)`),
# never spelled out by hand, so caller and callee cannot drift apart.
INTERNAL_PATH = re.compile(r'"[^"]*/internal/')
for path in sorted(glob.glob("Services/*/Sources/**/*.swift", recursive=True) + glob.glob("Shared/**/*.swift", recursive=True)):
    if path.endswith("WireTypes/InternalRoutes.swift"):
        continue
    for number, line in code_lines(path):
        if INTERNAL_PATH.search(line):
            findings.append(f"{path}:{number}: a hand-built internal path (declare it in InternalRoutes): {line.strip()[:100]}")

# #50 a store takes a connection and opens no transaction: the flow that calls it owns one.
# (The last seven moved to their flows; the count per file stays here should one ever be
# allowed again, and it only goes down.)
STORE_TRANSACTIONS_LEFT: dict[str, int] = {}
for path in sorted(glob.glob("Services/*/Sources/**/Store/*.swift", recursive=True)):
    opened = [number for number, line in code_lines(path) if "withTransaction" in line]
    allowed = STORE_TRANSACTIONS_LEFT.get(path, 0)
    if len(opened) > allowed:
        findings.append(f"{path}:{opened[allowed]}: a transaction opened in a store (it takes a connection; the flow owns the transaction)")
    elif len(opened) < allowed:
        findings.append(f"{path}:1: {len(opened)} transactions left in this store: lower its count in lint.py's STORE_TRANSACTIONS_LEFT")

# #50 a flow takes the few dependencies it uses, never the service's whole context (the
# composition builds it from the context).
for path in sorted(glob.glob("Services/*/Sources/**/Flows/*.swift", recursive=True)):
    for number, line in code_lines(path):
        if re.search(r"\b(AuthContext|ctx)\b", line):
            findings.append(f"{path}:{number}: a flow holds the whole context; take the dependencies it uses: {line.strip()[:100]}")

# #50 rows are counted by one helper (`PostgresRows.count()`), not by a loop written again.
ROW_COUNT_LOOP = re.compile(r"for try await _ in [^{]*\{\s*\w+ \+= 1\s*\}", re.S)
for path in sorted(glob.glob("Services/*/Sources/**/*.swift", recursive=True) + glob.glob("Shared/**/*.swift", recursive=True)):
    if path.endswith("ServiceKit/DatabasePool.swift"):
        continue
    text = open(path, encoding="utf-8").read()
    for m in ROW_COUNT_LOOP.finditer(text):
        findings.append(f"{path}:{text[:m.start()].count(chr(10)) + 1}: a row-count loop (use `.count()` on the rows)")

# #50 the settings: read in the code, explained once in .env.example, the document generated.
findings += configuration_doc.findings()

# #50 a flow owns its transaction: a route decodes, authorizes, calls one flow and encodes, and
# opens no transaction (the 48 that routes held moved into Flows/).
for path in sorted(glob.glob("Services/*/Sources/**/Routes/*.swift", recursive=True)):
    for number, line in code_lines(path):
        if "withTransaction" in line:
            findings.append(f"{path}:{number}: a transaction opened in a route (a flow owns its transaction): {line.strip()[:100]}")

# #50 the README stays short: what it is, the two commands, the walkthrough, where to read on.
README_LINES = sum(1 for _ in open("README.md", encoding="utf-8"))
if README_LINES > 200:
    findings.append(f"README.md:200: {README_LINES} lines; the README says what it is and how to run it (the rest goes to docs/)")

# #50 names in the docs match the code: a type, `Type.member` or file a document names in
# backticks is declared somewhere (a Swift declaration, a target, an OpenAPI schema, a file), or
# is another project's (the list below). A rename that leaves a document behind fails here.
EXTERNAL_NAMES = {
    "Unregistered", "BadDeviceToken", "DeviceTokenNotForTopic",  # APNs' reasons
    "AsyncSequence", "TaskLocal", "AsyncHTTPClientTransport", "ServerChildChannel", "EventSource",  # Swift, NIO, the web
    "EdDSA", "Secure", "Cluster", "ScheduledBackup", "Client",  # JOSE, cookies, CloudNativePG, the generated client
}
swift_sources = [p for g in ["Services/**/*.swift", "Shared/**/*.swift", "Tests/**/*.swift", "Clients/**/*.swift", "Tools/**/*.swift"]
                 for p in glob.glob(g, recursive=True)] + ["Package.swift"]
swift_text = "\n".join(open(p, encoding="utf-8").read() for p in swift_sources)
declared = set(re.findall(r"\b(?:class|struct|enum|actor|protocol|typealias|extension|func|var|let|case)\s+([A-Za-z_][A-Za-z0-9_]*)", swift_text))
declared |= set(re.findall(r'name:\s*"([A-Za-z]+)"', open("Package.swift").read()))
declared |= {os.path.basename(p)[:-len(".swift")] for p in swift_sources}
declared |= {f"{s}{suffix}" for s in ["Auth", "Subscription", "Offline", "Ads"] for suffix in ["Service", "API", "Tests"]}
for document in glob.glob("Services/*/Sources/OpenAPI/openapi.json"):
    declared |= set(json.load(open(document)).get("components", {}).get("schemas", {}))
file_names = {os.path.basename(p) for p in subprocess.run(["git", "ls-files"], capture_output=True, text=True).stdout.split()}
file_names.add("Package.resolved")  # SwiftPM writes it; not kept in git
DOC_NAME = re.compile(r"`([A-Z][a-z][A-Za-z0-9]*)(?:\.([a-z][A-Za-z0-9]*))?(?:\([^`]*\))?`")
for document in ["README.md", "BENCHMARKS.md"] + sorted(glob.glob("docs/*.md")):
    for number, line in enumerate(open(document, encoding="utf-8"), 1):
        for m in DOC_NAME.finditer(line):
            name, member = m.group(1), m.group(2)
            if member in ("swift", "md", "py", "sh", "sql", "json", "yaml", "resolved"):
                known = f"{name}.{member}" in file_names
            else:
                known = name in EXTERNAL_NAMES or (name in declared and (member is None or member in declared))
            if not known:
                findings.append(f"{document}:{number}: {m.group(0)} is named here but declared nowhere in the code")

# The error catalogue of each service: no code is answered by a literal unless it is one of
# ServiceKit's shared ones, every case of the catalogue is answered somewhere, and the OpenAPI
# document's Error enum is exactly what error_codes.py derives from the catalogue.
shared = set(scan(["Shared/ServiceKit/*.swift"])) | set(HELPERS) | set(GATEWAY)
for service in ["auth", "subscription", "offline", "ads"]:
    name = service.capitalize()
    path = os.path.relpath(catalogue_path(service), ROOT)
    if not os.path.exists(path):
        findings.append(f"{path}:1: the service has no error catalogue")
        continue
    sources = [f for f in glob.glob(f"Services/{name}/Sources/**/*.swift", recursive=True) if f != path]
    for code in sorted(set(scan(sources)) - shared):
        findings.append(f"{path}:1: `{code}` is answered as a literal; declare it here and throw AppError({name}ErrorCode.…)")
    text = "\n".join(open(f).read() for f in sources)
    for code, (_, _, case) in sorted(catalogue(service).items()):
        if not re.search(r"\." + case + r"\b", text):
            findings.append(f"{path}:1: `{code}` is in the catalogue but nothing answers it")
    document = json.load(open(f"Services/{name}/Sources/OpenAPI/openapi.json"))
    documented = set(document["components"]["schemas"]["Error"]["properties"]["error"]["enum"])
    if documented != set(codes(service)):
        missing, extra = sorted(set(codes(service)) - documented), sorted(documented - set(codes(service)))
        findings.append(f"Services/{name}/Sources/OpenAPI/openapi.json:1: the Error enum differs from the catalogue "
                        f"(missing {missing}, extra {extra}): run python3 deploy/local/openapi_gen.py")

# #47 the console: one Content-Security-Policy wherever it is served; nothing the CSP refuses.
def csp(path):
    return sorted(set(re.findall(r'add_header Content-Security-Policy "([^"]+)"', open(path).read())))
if csp("deploy/gateway/nginx.conf") != csp("deploy/k8s/console.yaml") or len(csp("deploy/gateway/nginx.conf")) != 1:
    findings.append("deploy/k8s/console.yaml:1: the console's Content-Security-Policy differs from deploy/gateway/nginx.conf's")
for page in glob.glob("Console/**/*.*", recursive=True):
    text = open(page).read()
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(("//", "/*", "*")):
            continue
        if re.search(r"<script(?![^>]*\bsrc=)[^>]*>|\bstyle=\"|\bon[a-z]+=\"|https?://(?!www\.w3\.org/2000/svg|[a-z.]*example\.com)|innerHTML|eval\(", line):
            findings.append(f"{page}:{n}: inline script or style, an outside URL, innerHTML or eval (the console's CSP and its rule)")

targets = ["Package.swift", "Services", "Shared", "Tests", "Tools", "Clients"]
format_run = subprocess.run(["swift", "format", "lint", "--strict", "--parallel", "-r", "--configuration", ".swift-format", *targets],
                            capture_output=True, text=True)
for line in (format_run.stdout + format_run.stderr).splitlines():
    if line.strip():
        findings.append(line.replace(ROOT + "/", ""))
if format_run.returncode != 0 and not (format_run.stdout + format_run.stderr).strip():
    findings.append(f"swift format lint failed with exit {format_run.returncode}")

for finding in findings:
    print(finding)
print(f"lint: {len(findings)} finding(s)" if findings else "lint: SQL only in Store/, Domain/ pure, error catalogues match the documents, formatted")
sys.exit(1 if findings else 0)

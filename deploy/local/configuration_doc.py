"""docs/CONFIGURATION.md, generated (#50): every environment variable, its default, who reads it
and what it means.

Two sources, each the truth for its part:
- the code says which variables exist, who reads them and the defaults
  (`env.string("X", default: "…")`, `.int`, `.bool`, `.optional`, and `${X:-…}` in stack.sh);
- `.env.example` (the file an operator copies to `.env`) says what each means, in sections.

`python3 deploy/local/configuration_doc.py` writes the document; `make lint` fails when the two
sources disagree (a variable read but not explained, explained but never read, a default that
differs) or when the document is not what this script writes."""
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.dirname(os.path.abspath(__file__)) + "/../..")
DOC = "docs/CONFIGURATION.md"
SERVICES = ["auth", "subscription", "offline", "ads"]

# A read in Swift: env.string("X", default: "lit"), env.int("X", default: 10_000), env.bool(…),
# env.optional("X"); a templated one names every service's variable: "\(p)_DATABASE_USER".
READ = re.compile(r'\.(string|int|bool|optional)\(\s*"(?P<name>[A-Z][A-Z0-9_]*|\\\([^)]*\)_[A-Z0-9_]+)"'
                  r'(?:,\s*default:\s*(?P<default>"[^"\\]*"|[0-9_]+|true|false)(?=\s*[),]))?')
OTHER_READ = re.compile(r'(?:named:\s*|environment\[)"(?P<name>[A-Z][A-Z0-9_]+)"')
STACK_READ = re.compile(r'\$\{(?P<name>[A-Z][A-Z0-9_]+):-(?P<default>[^}]*)\}')
# The standard OpenTelemetry variables (SpanExporter reads them as the SDKs do): documented by
# OpenTelemetry; .env.example names the ones an operator sets.
LIBRARY = re.compile(r"^OTEL_")
# The operating system's own (the operator's name in an audit line), not ours to explain.
OPERATING_SYSTEM = {"USER", "HOME", "PATH"}
# What the local stack's script reads that is not configuration (paths it sets for itself, test
# switches documented where they are used).
STACK_INTERNAL = {"BUILD_FLAGS", "TEST_FLAGS", "FRESH", "PUSH_STANDIN_FLAGS", "TEST_HANG_SECONDS"}


def code_reads():
    """{name: {"readers": set, "defaults": set}} from the Swift sources and stack.sh."""
    reads = {}

    def add(name, reader, default=None):
        entry = reads.setdefault(name, {"readers": set(), "defaults": set()})
        entry["readers"].add(reader)
        if default is not None:
            entry["defaults"].add(default)

    for path in glob.glob(os.path.join(ROOT, "Services/*/Sources/**/*.swift"), recursive=True) + \
            glob.glob(os.path.join(ROOT, "Shared/**/*.swift"), recursive=True):
        rel = os.path.relpath(path, ROOT).split("/")
        reader = rel[1].lower() if rel[0] == "Services" else "every service"
        text = open(path, encoding="utf-8").read()
        for m in READ.finditer(text):
            default = m.group("default")
            if default is not None:
                default = default.strip('"').replace("_", "") if not default.startswith('"') else default.strip('"')
            name = m.group("name")
            if name.startswith("\\("):
                for service in SERVICES:
                    add("<SERVICE>" + name[name.index(")") + 1:], reader)
            else:
                add(name, reader, default)
        for m in OTHER_READ.finditer(text):
            if m.group("name") not in OPERATING_SYSTEM:
                add(m.group("name"), reader)
    stack = open(os.path.join(ROOT, "deploy/local/stack.sh"), encoding="utf-8").read()
    # The stack passes the services' own variables through with its own choices (the test
    # stack's trace ratio): only what the script alone reads is its configuration.
    for m in STACK_READ.finditer(stack):
        name = m.group("name")
        name = re.sub(r"^(AUTH|SUBSCRIPTION|OFFLINE|ADS)_(?=PORT$|HOST$|URL$)", "<SERVICE>_", name)
        if name not in STACK_INTERNAL and not LIBRARY.match(name) and not (name in reads and "local stack" not in reads[name]["readers"]):
            add(name, "local stack", m.group("default"))
    return reads


def example_entries():
    """[(section, [(name, value, set_by_default, meaning, line)])] from .env.example."""
    sections, comments = [], []
    current = None
    for number, raw in enumerate(open(os.path.join(ROOT, ".env.example"), encoding="utf-8"), 1):
        line = raw.rstrip("\n")
        heading = re.match(r"^# --- (.+) ---$", line)
        if heading:
            current = (heading.group(1), [])
            sections.append(current)
            comments = []
            continue
        variable = re.match(r'^(#\s*)?(?P<name>[A-Z<][A-Z0-9_<>]*)=(?P<value>"[^"]*"|\S*)\s*(?:#\s*(?P<meaning>.*))?$', line)
        if variable and current is not None:
            meaning = " ".join(comments + [variable.group("meaning") or ""]).strip()
            current[1].append((variable.group("name"), variable.group("value").strip('"'), variable.group(1) is None, meaning, number))
            comments = []
        elif line.startswith("#") and current is not None:
            comments.append(line.lstrip("#").strip())
        elif not line.strip():
            comments = []
    return sections


def findings():
    """What disagrees between the code, .env.example and the document."""
    out = []
    reads = code_reads()
    listed = {}
    for _, entries in example_entries():
        for name, value, set_by_default, meaning, number in entries:
            where = f".env.example:{number}"
            if name in listed:
                out.append(f"{where}: {name} is explained twice")
            listed[name] = (value, set_by_default)
            if not meaning:
                out.append(f"{where}: {name} has no meaning (a `# …` after it or a comment line before it)")
            if name not in reads and not LIBRARY.match(name):
                out.append(f"{where}: {name} is explained but nothing reads it")
                continue
            defaults = reads.get(name, {}).get("defaults", set())
            if len(defaults) == 1 and set_by_default and value != next(iter(defaults)):
                out.append(f"{where}: {name}={value} here, but the code's default is {next(iter(defaults))}")
    for name, entry in sorted(reads.items()):
        if len(entry["defaults"]) > 1:
            out.append(f".env.example:1: {name} is read with different defaults: {', '.join(sorted(entry['defaults']))}")
        if name not in listed:
            out.append(f".env.example:1: {name} is read by {', '.join(sorted(entry['readers']))} but not explained here")
    current = open(os.path.join(ROOT, DOC), encoding="utf-8").read() if os.path.exists(os.path.join(ROOT, DOC)) else ""
    if current != document():
        out.append(f"{DOC}:1: not what deploy/local/configuration_doc.py writes (run it, or `make openapi`)")
    return out


def cell(text):
    return text.replace("|", "\\|")


def document():
    reads = code_reads()
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by deploy/local/configuration_doc.py from the code (names, defaults, readers) and",
        "     .env.example (meanings). Edit those, then `make openapi`; `make lint` fails when this differs. -->",
        "",
        "Every setting is an environment variable (12-factor). The defaults run the local stack with no",
        "set-up. `.env` (copy `.env.example`) is read by `make run`, docker-compose and the stack",
        "`make test` starts; the in-process tests take only the database settings from the environment.",
        "Outside `ENVIRONMENT=local` a service refuses to start while a secret is empty or still its",
        "built-in local value, and names each.",
        "",
    ]
    for title, entries in example_entries():
        lines += [f"## {title[0].upper() + title[1:]}", "", "| variable | default | read by | meaning |", "|---|---|---|---|"]
        for name, value, set_by_default, meaning, _ in entries:
            default = "per service" if name.startswith("<SERVICE>") else f"`{cell(value)}`" if value and set_by_default else "unset"
            readers = reads.get(name, {}).get("readers") or {"every service"}
            lines.append(f"| `{name}` | {default} | {', '.join(sorted(readers))} | {cell(meaning)} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    problems = [f for f in findings() if not f.startswith(DOC)]
    open(os.path.join(ROOT, DOC), "w", encoding="utf-8").write(document())
    print(f"wrote {DOC}")
    for problem in problems:
        print(problem, file=sys.stderr)
    sys.exit(1 if problems else 0)

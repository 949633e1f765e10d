#!/usr/bin/env python3
"""docs_check.py CHECK...: the docs against what they describe, each list read from the
code or from a running daemon, never from another doc.  Prints "ok NAME" or
"FAIL NAME: why" per check (tests/run.sh counts them); tests/e2e_docs.sh runs it.

  keys H2PARK            docs/configuration.md's key tables against the keys the parser
                         accepts (probed through H2PARK --check, one candidate at a time:
                         every identifier-like string literal in server/) and against
                         config/default.conf (every key there documented, with the
                         documented default)
  metrics URL            docs/observability.md's /metrics table against the families a
                         running daemon exports at URL (names and types)
  stats URL              docs/observability.md's /-/stats table against the fields it returns
  options H2PARK         docs/operations.md's Options table and H2PARK --help against the
                         options in server/main.c's getopt table
  links                  every relative link and #anchor in README.md, docs/ and tests/
  readme                 every README code block but the shell ones is (a part of) a
                         config/examples/ file, which e2e_examples.sh runs
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
import urllib.request

failures = 0


def ok(name):
    print("ok " + name)


def fail(name, why):
    global failures
    failures += 1
    print("FAIL %s: %s" % (name, why))


def tables(path, first_header):
    """Rows (as lists of cells) of every Markdown table in path whose first column is
    headed first_header, outside fenced code."""
    rows, in_table, fence = [], False, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence or not line.startswith("|"):
            in_table = False if not line.startswith("|") else in_table
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if not in_table:
            in_table = cells and cells[0] == first_header
            header_seen = True
            continue
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        rows.append(cells)
    return rows


def code_names(cell):
    return re.findall(r"`([^`]+)`", cell)


def both_ways(name, actual, documented, undocumented_why, absent_why):
    """Fails NAME for each of actual not in documented and each of documented not in
    actual (the whys take the item); returns how many."""
    bad = 0
    for x in sorted(set(actual) - set(documented)):
        fail(name + "_documented", undocumented_why % x)
        bad += 1
    for x in sorted(set(documented) - set(actual)):
        fail(name + "_exists", absent_why % x)
        bad += 1
    return bad


# ---- configuration keys ----

def probe(h2park, text):
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(text)
        name = f.name
    try:
        p = subprocess.run([os.path.abspath(h2park), "-c", name, "--check", "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=20, cwd=tempfile.gettempdir())
        return (p.stdout + p.stderr).replace(name, "FILE")
    finally:
        os.unlink(name)


def parser_keys(h2park):
    """Every key the parser takes: a candidate is one unless the parser answers it as it
    answers a key that cannot exist."""
    sources = glob.glob("server/*.c") + glob.glob("server/**/*.c", recursive=True)
    cands = set()
    for s in set(sources):
        cands |= set(re.findall(r'"([a-z][a-z0-9_]{1,40})"', open(s, encoding="utf-8").read()))
    nokey = "zzq_not_a_key"
    unknown = probe(h2park, "%s = x\n" % nokey)
    if nokey not in unknown:
        return None, "the parser's answer to an unknown key does not name it: %r" % unknown
    keys = set()
    for c in sorted(cands):
        if probe(h2park, "%s = x\n" % c) != unknown.replace(nokey, c):
            keys.add(c)
    return keys, None


def check_keys(h2park):
    doc = "docs/configuration.md"
    rows = tables(doc, "key")
    documented = {}
    for r in rows:
        for k in code_names(r[0]):
            documented[k] = r[1] if len(r) > 1 else ""
    if not documented:
        return fail("docs_config_keys", "no key table (a table whose first column is 'key') in " + doc)
    keys, err = parser_keys(h2park)
    if err:
        return fail("docs_config_keys", err)
    if not both_ways("docs_config_key", keys, documented,
                     "key '%%s' is accepted by the parser but not documented in %s (add a row to its Keys table)" % doc,
                     "%s documents key '%%s', which the parser does not accept" % doc):
        ok("docs_config_keys (%d keys, every one documented)" % len(keys))

    # config/default.conf: set or shown commented out, every key documented and set to
    # the documented default.
    conf = {}
    for line in open("config/default.conf", encoding="utf-8"):
        m = re.match(r"^(#\s*)?([a-z_][a-z0-9_]*)\s*=\s*(.*?)\s*$", line)
        if m and m.group(2) in keys:
            if not m.group(1):
                conf.setdefault(m.group(2), []).append(m.group(3))
            else:
                conf.setdefault(m.group(2), [])
    bad = 0
    for k, values in sorted(conf.items()):
        if k not in documented:
            fail("docs_default_conf_documented", "config/default.conf has '%s', not documented in %s" % (k, doc))
            bad += 1
            continue
        want = sorted(code_names(documented[k]))
        if sorted(values) != want and not (values == [""] and not want):
            fail("docs_default_conf_defaults", "config/default.conf sets %s = %s, %s says the default is %s"
                 % (k, " / ".join(values) or "(nothing)", doc, documented[k]))
            bad += 1
    for k, d in sorted(documented.items()):
        if k in keys and code_names(d) and k not in conf:
            fail("docs_default_conf_complete", "%s gives %s a default (%s), config/default.conf does not show it"
                 % (doc, k, d))
            bad += 1
    if not bad:
        ok("docs_default_conf_agrees (%d keys)" % len(conf))


# ---- /metrics and /-/stats ----

def fetch(url):
    return urllib.request.urlopen(url, timeout=10).read().decode()


def check_metrics(url):
    doc = "docs/observability.md"
    documented = {}
    for r in tables(doc, "family"):
        for name in code_names(r[0]):
            documented[re.sub(r"\{.*", "", name)] = r[1] if len(r) > 1 else ""
    exported = {}
    for line in fetch(url).splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            exported[m.group(1)] = m.group(2)
    bad = both_ways("docs_metrics", exported, documented, "/metrics exports %%s, not in %s's /metrics table" % doc,
                    "%s documents %%s, which /metrics does not export" % doc)
    for name in sorted(set(documented) & set(exported)):
        if documented[name] and documented[name] != exported[name]:
            fail("docs_metrics_types", "%s is a %s, %s says %s" % (name, exported[name], doc, documented[name]))
            bad += 1
    if not bad:
        ok("docs_metrics_agree (%d families)" % len(exported))


def check_stats(url):
    doc = "docs/observability.md"
    documented = set()
    for r in tables(doc, "field"):
        documented |= set(code_names(r[0]))
    fields = set(json.loads(fetch(url)))
    if not both_ways("docs_stats", fields, documented, "/-/stats returns '%%s', not in %s's /-/stats table" % doc,
                     "%s documents '%%s', which /-/stats does not return" % doc):
        ok("docs_stats_agree (%d fields)" % len(fields))


# ---- command-line options ----

def check_options(h2park):
    src = open("server/main.c", encoding="utf-8").read()
    longs = set(re.findall(r'\{\s*"([a-z][a-z-]*)",\s*(?:no|required|optional)_argument', src))
    shorts = {}
    for name, letter in re.findall(r'\{\s*"([a-z][a-z-]*)",\s*\w+_argument,\s*NULL,\s*\'(.)\'', src):
        shorts[name] = letter
    if not longs:
        return fail("docs_options", "no getopt table found in server/main.c")
    helptext = subprocess.run([h2park, "--help"], capture_output=True, text=True, timeout=10).stdout
    doc = "docs/operations.md"
    documented = set()
    for r in tables(doc, "option"):
        documented |= set(re.findall(r"--([a-z][a-z-]*)", r[0]))
    bad = both_ways("docs_options", ["--" + o for o in longs], ["--" + o for o in documented],
                    "%%s is an option (server/main.c) that %s's Options table does not list" % doc,
                    "%s lists %%s, which server/main.c does not take" % doc)
    bad += both_ways("docs_help", ["--" + o for o in longs], ["--" + o for o in re.findall(r"--([a-z][a-z-]*)", helptext)],
                     "%s is an option (server/main.c) that --help does not list",
                     "--help lists %s, which server/main.c does not take")
    for o in sorted(longs):
        if o in shorts and not re.search(r"-%s, --%s\b" % (shorts[o], o), helptext):
            fail("docs_help_short_options", "--help does not give -%s as the short form of --%s" % (shorts[o], o))
            bad += 1
    if not bad:
        ok("docs_options_agree (%d options)" % len(longs))


# ---- links and README examples ----

def anchors(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^#+ (.*)", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else "%s-%d" % (a, n))
    return out


def check_links():
    files = ["README.md", "tests/README.md"] + sorted(glob.glob("docs/*.md"))
    bad = 0
    for f in files:
        text = re.sub(r"```.*?```", "", open(f, encoding="utf-8").read(), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(full):
                fail("docs_links", "%s links to %s, which does not exist" % (f, target))
                bad += 1
            elif frag and full.endswith(".md") and frag not in anchors(full):
                fail("docs_links", "%s links to %s: no such heading in %s" % (f, target, full))
                bad += 1
    if not bad:
        ok("docs_links (%d pages)" % len(files))


def check_readme():
    """Every README code block but the shell ones shows (a part of) a config/examples/ file,
    comments aside, and every config/examples/ file it names exists."""
    text = open("README.md", encoding="utf-8").read()
    examples = {}
    for path in glob.glob("config/examples/**", recursive=True):
        if not os.path.isfile(path):
            continue
        lines = [l.rstrip() for l in open(path, encoding="utf-8") if l.strip() and not l.lstrip().startswith("#")]
        examples[path] = "\n" + "\n".join(lines) + "\n"
    bad = 0
    blocks = re.findall(r"```([a-z]*)\n(.*?)```", text, flags=re.S)
    for lang, block in blocks:
        if lang == "sh":
            continue
        part = "\n" + "\n".join(l.rstrip() for l in block.strip("\n").splitlines()) + "\n"
        if not any(part in body for body in examples.values()):
            fail("docs_readme_examples", "README.md's block beginning %r is in no config/examples/ file: the "
                 "examples are what the tests run" % block.strip().splitlines()[0])
            bad += 1
    for path in sorted(set(re.findall(r"\((config/examples/[^)#]+)\)", text))):
        if path not in examples:
            fail("docs_readme_examples", "README.md names %s, which does not exist" % path)
            bad += 1
    if not bad:
        ok("docs_readme_examples (%d blocks)" % len([b for b in blocks if b[0] != "sh"]))


def main():
    args = sys.argv[1:]
    while args:
        what = args.pop(0)
        if what == "keys":
            check_keys(args.pop(0))
        elif what == "metrics":
            check_metrics(args.pop(0))
        elif what == "stats":
            check_stats(args.pop(0))
        elif what == "options":
            check_options(args.pop(0))
        elif what == "links":
            check_links()
        elif what == "readme":
            check_readme()
        else:
            sys.exit("docs_check.py: unknown check " + what)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        # A check that crashes must not pass silently: the crash is a failure of its own.
        fail("docs_check", "crashed: " + traceback.format_exc().strip().splitlines()[-1])
        traceback.print_exc()
        sys.exit(2)

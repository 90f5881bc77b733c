/**
 * The measuring script of a Python repository's quality metrics, run in the
 * sandbox by `python3` at the workspace root. It is sent as a workspace file
 * ({@link MEASURE_SCRIPT_PATH}) and removes itself before any tool reads the tree, so no metric
 * sees it. Its one argument is JSON `{"enabled": [metric…], "timeouts": {metric: seconds}}`.
 *
 * It prints one line `LOOPSMITH_METRICS <json>`: `{"metrics": {name: {"status": "ok", "tool",
 * "value", "cases"} | {"status": "unavailable", "tool"?, "reason"}}}`, where `cases` maps a
 * case key to whether it passes (a finding is a failing case). Keys carry no line numbers, so
 * an edit above a finding does not turn it into a new one: `path:text#k`, k the occurrence.
 *
 * Tools (from Debian's packages in the sandbox image, deploy/build-images.sh): pytest and
 * coverage (tests, coverage), pyflakes (lint), mypy (type errors, plus each `# type: ignore`),
 * radon (complexity), bandit (security, plus each `# nosec`); documentation coverage, the
 * import check and the suppression counts are this script's own (`ast`, `importlib`).
 */

/** Where the script is laid in the workspace (it deletes itself first thing). */
export const MEASURE_SCRIPT_PATH = ".loopsmith-measure.py";

/** The marker of the script's result line on stdout. */
export const METRICS_MARKER = "LOOPSMITH_METRICS ";

/** The script's source (Python 3.11+; standard library only, the tools run as `python3 -m`). */
export const MEASURE_PY = String.raw`
import ast, json, os, re, subprocess, sys, tempfile
from importlib import metadata

os.remove(__file__)
CONF = json.loads(sys.argv[1])
ENABLED = CONF.get("enabled", [])
TIMEOUTS = CONF.get("timeouts", {})
TMP = tempfile.mkdtemp(prefix="loopsmith-measure-")
SKIP_DIRS = {"node_modules", "venv", ".venv", "env", "build", "dist", "__pycache__", "site-packages"}

def py_files():
    out = []
    for d, dirs, files in os.walk("."):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith(".py"):
                out.append(os.path.relpath(os.path.join(d, f), "."))
    return out

def is_test(p):
    parts = p.split(os.sep)
    base = parts[-1]
    return any(x in ("tests", "test") for x in parts[:-1]) or base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"

ALL = py_files()
SOURCE = [p for p in ALL if not is_test(p)]

def version(dist):
    try:
        return dist + " " + metadata.version(dist)
    except Exception:
        return None

def run(argv, metric, env=None):
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUTS.get(metric, 120), env=env)

def tail(s, n=300):
    s = (s or "").strip()
    return s[-n:]

def keyed(pairs):
    seen = {}
    cases = {}
    for key, ok in pairs:
        k = seen.get(key, 0) + 1
        seen[key] = k
        cases[key + "#" + str(k)] = ok
    return cases

def read(p):
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []

def comments(pattern, files, label):
    rx = re.compile(pattern)
    return [(p + ":" + label + ":" + line.strip(), False) for p in files for line in read(p) if rx.search(line)]

def no_module(r, mod):
    return r.returncode != 0 and ("No module named " + mod) in (r.stderr or "")

def tests_and_coverage():
    out = {}
    tool = version("pytest")
    cov = version("coverage")
    if tool is None:
        return {"tests": {"status": "unavailable", "reason": "pytest is not installed in the sandbox"}}
    junit = os.path.join(TMP, "junit.xml")
    data = os.path.join(TMP, "coverage")
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    pytest = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=" + junit]
    use_cov = cov is not None and "coverage" in ENABLED
    argv = [sys.executable] + (["-m", "coverage", "run", "--data-file=" + data, "--source=."] if use_cov else []) + pytest
    try:
        r = run(argv, "tests", env)
    except subprocess.TimeoutExpired:
        reason = "the test run passed its time limit of %ss" % TIMEOUTS.get("tests", 120)
        return {"tests": {"status": "unavailable", "tool": tool, "reason": reason}, "coverage": {"status": "unavailable", "tool": cov, "reason": reason}}
    cases = []
    if os.path.exists(junit):
        import xml.etree.ElementTree as ET
        for tc in ET.parse(junit).getroot().iter("testcase"):
            kids = {c.tag for c in tc}
            if "skipped" in kids:
                continue
            cases.append((tc.get("classname", "") + "::" + tc.get("name", ""), not ({"failure", "error"} & kids)))
    if not cases:
        out["tests"] = {"status": "unavailable", "tool": tool, "reason": "pytest ran no test (exit code %s): %s" % (r.returncode, tail(r.stdout + r.stderr))}
    else:
        c = keyed(cases)
        out["tests"] = {"status": "ok", "tool": tool, "value": 100.0 * sum(c.values()) / len(c), "cases": c}
    if "coverage" in ENABLED:
        if cov is None:
            out["coverage"] = {"status": "unavailable", "reason": "coverage is not installed in the sandbox"}
        elif not cases:
            out["coverage"] = {"status": "unavailable", "tool": cov, "reason": "no test ran, so nothing was measured"}
        else:
            report = os.path.join(TMP, "coverage.json")
            omit = "*/tests/*,tests/*,*/test/*,test/*,*test_*.py,*_test.py,*conftest.py"
            j = run([sys.executable, "-m", "coverage", "json", "--data-file=" + data, "-o", report, "--omit=" + omit, "-q"], "coverage")
            if j.returncode != 0 or not os.path.exists(report):
                out["coverage"] = {"status": "unavailable", "tool": cov, "reason": "coverage json failed: " + tail(j.stdout + j.stderr)}
            else:
                with open(report) as f:
                    files = json.load(f).get("files", {})
                pairs = []
                covered = total = 0
                for p, info in sorted(files.items()):
                    lines = read(p)
                    hit = set(info.get("executed_lines", []))
                    for n in sorted(set(info.get("executed_lines", [])) | set(info.get("missing_lines", [])) | set(info.get("excluded_lines", []))):
                        text = lines[n - 1].strip() if 0 < n <= len(lines) else str(n)
                        pairs.append((os.path.normpath(p) + ":" + text, n in hit))
                        total += 1
                        covered += n in hit
                if total == 0:
                    out["coverage"] = {"status": "unavailable", "tool": cov, "reason": "no source line was measured"}
                else:
                    out["coverage"] = {"status": "ok", "tool": cov, "value": 100.0 * covered / total, "cases": keyed(pairs)}
    return out

def lint():
    tool = version("pyflakes")
    if tool is None:
        return {"status": "unavailable", "reason": "pyflakes is not installed in the sandbox"}
    if not ALL:
        return {"status": "unavailable", "tool": tool, "reason": "no Python file"}
    r = run([sys.executable, "-m", "pyflakes"] + ALL, "lint")
    if no_module(r, "pyflakes") or r.returncode not in (0, 1):
        return {"status": "unavailable", "tool": tool, "reason": "pyflakes failed: " + tail(r.stderr)}
    pairs = []
    for line in (r.stdout + r.stderr).splitlines():
        m = re.match(r"^(.+?):\d+:(?:\d+:)? (.*)$", line)
        if m:
            msg = re.sub(r"line \d+", "line N", m.group(2)).strip()
            pairs.append((os.path.normpath(m.group(1)) + ":" + msg, False))
    return {"status": "ok", "tool": tool, "value": float(len(pairs)), "cases": keyed(pairs)}

def type_errors():
    tool = version("mypy")
    if tool is None:
        return {"status": "unavailable", "reason": "mypy is not installed in the sandbox"}
    if not ALL:
        return {"status": "unavailable", "tool": tool, "reason": "no Python file"}
    argv = [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir=" + os.path.join(TMP, "mypy"), "--show-error-codes", "--no-error-summary", "--hide-error-context", "--explicit-package-bases"] + ALL
    r = run(argv, "type_errors")
    if r.returncode not in (0, 1):
        return {"status": "unavailable", "tool": tool, "reason": "mypy failed (exit code %s): %s" % (r.returncode, tail(r.stdout + r.stderr))}
    pairs = []
    for line in r.stdout.splitlines():
        m = re.match(r"^(.+?):\d+(?::\d+)?: error: (.*)$", line)
        if m:
            pairs.append((os.path.normpath(m.group(1)) + ":" + m.group(2).strip(), False))
    pairs += comments(r"#\s*type:\s*ignore", ALL, "suppressed by type: ignore")
    return {"status": "ok", "tool": tool, "value": float(len(pairs)), "cases": keyed(pairs)}

def complexity():
    tool = version("radon")
    if tool is None:
        return {"status": "unavailable", "reason": "radon is not installed in the sandbox"}
    if not SOURCE:
        return {"status": "unavailable", "tool": tool, "reason": "no non-test Python file"}
    r = run([sys.executable, "-m", "radon", "cc", "-j"] + SOURCE, "complexity")
    try:
        blocks = [b for v in json.loads(r.stdout).values() if isinstance(v, list) for b in v]
    except ValueError:
        return {"status": "unavailable", "tool": tool, "reason": "radon failed: " + tail(r.stderr)}
    if not blocks:
        return {"status": "unavailable", "tool": tool, "reason": "no function or class to measure"}
    return {"status": "ok", "tool": tool, "value": sum(b["complexity"] for b in blocks) / len(blocks)}

def doc_coverage():
    pairs = []
    for p in SOURCE:
        try:
            tree = ast.parse("\n".join(read(p)))
        except SyntaxError:
            return {"status": "unavailable", "tool": "ast (python %d.%d)" % sys.version_info[:2], "reason": "%s does not parse" % p}
        def walk(body, prefix):
            for n in body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("_"):
                    pairs.append((p + ":" + prefix + n.name, ast.get_docstring(n) is not None))
                    if isinstance(n, ast.ClassDef):
                        walk(n.body, prefix + n.name + ".")
        walk(tree.body, "")
    tool = "ast (python %d.%d)" % sys.version_info[:2]
    if not pairs:
        return {"status": "unavailable", "tool": tool, "reason": "no public function or class"}
    c = keyed(pairs)
    return {"status": "ok", "tool": tool, "value": 100.0 * sum(c.values()) / len(c), "cases": c}

IMPORTER = r'''
import importlib, json, sys
sys.path.insert(0, ".")
out = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        out[name] = True
    except BaseException as e:
        out[name] = False
print("\nIMPORTS " + json.dumps(out))
'''

def imports():
    tool = "importlib (python %d.%d)" % sys.version_info[:2]
    names = []
    for p in SOURCE:
        if os.path.basename(p) in ("setup.py", "noxfile.py", "fabfile.py", "manage.py"):
            continue  # scripts that act when imported
        parts = p[:-3].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(x.isidentifier() for x in parts):
            names.append(".".join(parts))
    if not names:
        return {"status": "unavailable", "tool": tool, "reason": "no importable module"}
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    r = run([sys.executable, "-c", IMPORTER] + names, "imports", env)
    m = re.search(r"^IMPORTS (.*)$", r.stdout, re.M)
    if not m:
        return {"status": "unavailable", "tool": tool, "reason": "the import check did not finish: " + tail(r.stderr)}
    c = json.loads(m.group(1))
    return {"status": "ok", "tool": tool, "value": 100.0 * sum(c.values()) / len(c), "cases": c}

def security():
    tool = version("bandit")
    if tool is None:
        return {"status": "unavailable", "reason": "bandit is not installed in the sandbox"}
    if not SOURCE:
        return {"status": "unavailable", "tool": tool, "reason": "no non-test Python file"}
    r = run([sys.executable, "-m", "bandit", "-q", "-f", "json"] + SOURCE, "security")
    try:
        results = json.loads(r.stdout).get("results", [])
    except ValueError:
        return {"status": "unavailable", "tool": tool, "reason": "bandit failed: " + tail(r.stderr)}
    pairs = [(os.path.normpath(x.get("filename", "")) + ":" + x.get("test_id", "") + ":" + x.get("issue_text", ""), False) for x in results]
    pairs += comments(r"#\s*nosec", SOURCE, "suppressed by nosec")
    return {"status": "ok", "tool": tool, "value": float(len(pairs)), "cases": keyed(pairs)}

def guard(name, fn):
    try:
        return fn()
    except subprocess.TimeoutExpired:
        return {"status": "unavailable", "reason": "%s passed its time limit of %ss" % (name, TIMEOUTS.get(name, 120))}
    except Exception as e:
        return {"status": "unavailable", "reason": "%s failed: %s: %s" % (name, type(e).__name__, e)}

metrics = {}
if "tests" in ENABLED or "coverage" in ENABLED:
    both = guard("tests", tests_and_coverage)
    if "status" in both:
        both = {"tests": both}
    metrics.update({k: v for k, v in both.items() if k in ENABLED})
    for k in ("tests", "coverage"):
        if k in ENABLED and k not in metrics:
            metrics[k] = both.get("tests", {"status": "unavailable", "reason": "not measured"})
for name, fn in (("lint", lint), ("type_errors", type_errors), ("complexity", complexity), ("doc_coverage", doc_coverage), ("imports", imports), ("security", security)):
    if name in ENABLED:
        metrics[name] = guard(name, fn)
print("\nLOOPSMITH_METRICS " + json.dumps({"metrics": metrics}, sort_keys=True))
`;

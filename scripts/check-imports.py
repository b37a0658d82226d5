#!/usr/bin/env python3
"""Fails when a module depends on, or imports, what docs/architecture.md's module graph forbids.

The graph is the table under "## Module graph": one row per module, its last cell the modules it
may import (backticked; "—" for none). Every target of the package except test targets (`*Tests`)
must have a row. For each target this checks the dependencies Package.swift declares (from
`swift package dump-package`) and every `import` in its Swift sources: SwiftPM lets a module
import anything its dependencies bring along, so the sources are what keeps the layers honest.

    scripts/check-imports.py              check the package (run by `make lint`)
    scripts/check-imports.py --self-test  show that a forbidden import and an undeclared module fail
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAPH = os.path.join(ROOT, "docs", "architecture.md")
# The platform's modules, which any module may import.
PLATFORM = {"Foundation", "FoundationEssentials", "Glibc", "Musl", "Darwin", "Dispatch", "Synchronization", "_Concurrency"}
IMPORT = re.compile(r"^\s*(?:@testable\s+|@preconcurrency\s+)*(?:public\s+|internal\s+|package\s+|private\s+|fileprivate\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)")


def read_graph(text):
    """{module: allowed imports} from the table under '## Module graph'."""
    section = text.split("## Module graph", 1)
    if len(section) != 2:
        raise SystemExit(f"{GRAPH}: no '## Module graph' section")
    graph = {}
    for line in section[1].splitlines():
        if line.startswith("## "):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[1].startswith("`"):
            continue
        module = cells[1].strip("`")
        graph[module] = set(re.findall(r"`([^`]+)`", cells[-1]))
    return graph


def imports_of(directory):
    """{module: [(file, line number)]} for every import in the Swift files under `directory`."""
    found = {}
    for base, _, files in os.walk(directory):
        for name in sorted(files):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(base, name)
            with open(path, encoding="utf-8") as source:
                for number, line in enumerate(source, 1):
                    match = IMPORT.match(line)
                    if match:
                        found.setdefault(match.group(1), []).append((os.path.relpath(path, ROOT), number))
    return found


def check(graph, targets):
    """Problems, one line each. `targets`: [(name, type, declared dependencies, imports)]."""
    problems = []
    for name, kind, declared, imported in targets:
        if kind == "test":
            continue
        if name not in graph:
            problems.append(f"{name}: not in the module graph (docs/architecture.md); add a row saying its job and what it may import")
            continue
        allowed = graph[name]
        for dependency in declared:
            if dependency not in allowed:
                problems.append(f"{name}: Package.swift declares {dependency}, which the module graph does not allow it")
        for module, places in sorted(imported.items()):
            if module in allowed or module in PLATFORM or module == name:
                continue
            for path, number in places:
                problems.append(f"{path}:{number}: {name} imports {module}, which the module graph does not allow it")
    return problems


def package_targets():
    dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    targets = []
    for target in dump["targets"]:
        declared = []
        for dependency in target["dependencies"]:
            kind = next(iter(dependency))
            declared.append(dependency[kind][0])
        path = target.get("path") or os.path.join("Tests" if target["type"] == "test" else "Sources", target["name"])
        targets.append((target["name"], target["type"], declared, imports_of(os.path.join(ROOT, path))))
    return targets


def self_test():
    graph = read_graph("## Module graph\n| layer | module | job | may import |\n|---|---|---|---|\n"
                       "| 2 | `Low` | x | `TGBase` |\n| 3 | `High` | y | `Low`, `TGBase` |\n")
    clean = [("Low", "regular", ["TGBase"], {"Foundation": [("a.swift", 1)], "TGBase": [("a.swift", 2)]}),
             ("High", "regular", ["Low"], {"Low": [("b.swift", 1)]}),
             ("HighTests", "test", ["Anything"], {"Anything": [("t.swift", 1)]})]
    assert check(graph, clean) == [], check(graph, clean)
    upward = [("Low", "regular", ["TGBase"], {"High": [("a.swift", 3)]})]
    assert check(graph, upward) == ["a.swift:3: Low imports High, which the module graph does not allow it"], check(graph, upward)
    declared = [("Low", "regular", ["High"], {})]
    assert len(check(graph, declared)) == 1
    unknown = [("Stray", "regular", [], {})]
    assert "not in the module graph" in check(graph, unknown)[0]
    assert IMPORT.match("public import TGBase").group(1) == "TGBase"
    assert IMPORT.match("@testable import TGApp").group(1) == "TGApp"
    assert IMPORT.match("internal import COpenSSLShims").group(1) == "COpenSSLShims"
    assert IMPORT.match("// import TGApp") is None
    print("check-imports self-test: a forbidden import, an undeclared dependency and a module missing from the graph all fail")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    with open(GRAPH, encoding="utf-8") as text:
        graph = read_graph(text.read())
    targets = package_targets()
    problems = check(graph, targets)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check-imports: {sum(1 for t in targets if t[1] != 'test')} modules import only what docs/architecture.md's module graph allows")


if __name__ == "__main__":
    main()

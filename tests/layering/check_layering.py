#!/usr/bin/env python3
"""The house's one-way dependencies, enforced: every #include "folder/..." in the runtime's folders
must name a folder that folder may depend on (docs/architecture.md draws the same table).

    check_layering.py SOURCE_DIR      exit 1 naming every include that breaks a rule
    check_layering.py --self-test     the checker against small trees with and without violations

A folder is matched by its longest listed prefix ("trainers/job" before "trainers"). Folders not
listed (tests/, bench/, examples/, cli/) may include anything. An include within one's own top folder
is always allowed (trainers/job including trainers/ps)."""
import os
import re
import sys
import tempfile

# folder -> the other folders its files may include. Lower layers first.
ALLOWED = {
    "core": [],
    "tls": ["core"],
    "kernels": ["core"],
    "tune": ["core"],
    "gcs": ["core", "tls"],
    "data": ["core", "gcs"],
    "collectives": ["core", "tls", "gcs", "kernels"],
    "dashboard": ["core", "tls", "gcs"],
    "actors": ["core", "tls", "gcs", "dashboard", "tune"],
    # The runtime never includes models/ (a built-in model is a user of the public API) nor the
    # actors (only the job actors, trainers/job, are actors).
    "trainers": ["core", "tls", "gcs", "kernels", "data", "collectives"],
    # The public trainer API is installed for users' libraries: core's and the schema's headers only.
    "trainers/api": ["core", "data"],
    "trainers/job": ["core", "tls", "gcs", "kernels", "data", "collectives", "actors"],
    "models": ["core", "kernels", "data", "trainers"],
}
# Folders that may not lean on the rest of their own top folder: the trainer API is installed on its
# own (cmake/TroupeInstall.cmake), so trainers/api may include itself and its ALLOWED list only.
SEALED = {"trainers/api"}
SOURCE = (".h", ".cc", ".cu", ".cuh", ".hpp", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def owner(path):
    """The longest listed folder that `path` (relative, '/'-separated) lies in, or None."""
    best = None
    for folder in ALLOWED:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def target(include):
    """The listed folder an include names (longest prefix), or None for anything else."""
    return owner(include)


def top(folder):
    return folder.split("/")[0]


def violations(root):
    found = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("build", ".git", "node_modules")]
        for name in sorted(files):
            if not name.endswith(SOURCE):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            mine = owner(rel)
            if mine is None:
                continue
            with open(full, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    theirs = target(m.group(1))
                    # Not a folder of the house (a library's header), or one's own top folder (one's
                    # own folder only, when sealed): fine.
                    own = theirs == mine if mine in SEALED else theirs is not None and top(theirs) == top(mine)
                    if theirs is None or own or top(theirs) in ALLOWED[mine]:
                        continue
                    found.append(f"{rel}:{number}: {mine}/ may not include {m.group(1)} "
                                 f"({mine}/ may include: {', '.join(ALLOWED[mine]) or 'nothing else'})")
    return found


def self_test():
    def tree(files):
        root = tempfile.mkdtemp(prefix="layering-")
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        return root

    good = tree({"core/a.h": '#include <vector>\n#include "core/b.h"\n',
                 "trainers/api/trainer.h": '#include "core/status.h"\n#include "data/schema.h"\n',
                 "gcs/s.h": '#include "core/a.h"\n',
                 "trainers/t.cc": '#include "gcs/s.h"\n#include "trainers/api/trainer.h"\n',
                 "trainers/job/w.cc": '#include "actors/x.h"\n#include "trainers/t.h"\n',
                 "models/m/m.cc": '#include "trainers/api/trainer.h"\n',
                 "tests/t.cc": '#include "models/m/m.h"\n'})
    cases = [
        ("trainers/t.cc", '#include "models/m/m.h"\n'),     # the runtime including a model
        ("data/d.cc", '#include "trainers/dataset.h"\n'),   # the data path reaching up
        ("core/c.cc", '#include "gcs/s.h"\n'),              # a lower layer including a higher one
        ("trainers/ps/p.cc", '#include "actors/x.h"\n'),    # only trainers/job may use actors
        ("gcs/g.cc", '#include "collectives/c.h"\n'),
        ("trainers/api/a.h", '#include "trainers/sync/trainer_driver.h"\n'),  # the installed API leaning on the runtime
    ]
    ok = not violations(good)
    if not ok:
        print("self-test: a clean tree was reported:", violations(good))
    for path, text in cases:
        bad = tree({path: text})
        if not violations(bad):
            print(f"self-test: {path} with {text.strip()} was not reported")
            ok = False
    print("self-test:", "passed" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__)
        return 2
    found = violations(argv[1])
    for line in found:
        print(line)
    if found:
        print(f"check_layering: {len(found)} include(s) break the one-way dependencies (table in "
              f"tests/layering/check_layering.py and docs/architecture.md): move the code to the layer it "
              f"belongs to, or pass what it needs down through an interface")
        return 1
    print(f"check_layering: every include of {', '.join(sorted(ALLOWED))} follows the one-way dependencies")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Which kernels two builds compiled to the same SASS, compared function by
function (`cuobjdump -sass`, addresses and encodings dropped, names of
anonymous namespaces made alike). Why: a change that should touch only some
template instances (session 33: the fused forward's 64-token slabs) can be
shown to leave the others' code as it was, so that the timings of a build
measured earlier stand for them without another device call.
    python3 bench/sass_same.py A B [SUBSTRING]
A and B are objects, cubins or libraries; a library holds one cubin per
source file and the same kernel name in several, so give cubins (`cuobjdump
-xelf all libmas.so` writes them) or objects (lib/cuda/<name>.cu.o of a CMake
build). CUOBJDUMP names the tool when it is not on PATH. --rename PATTERN
REPLACEMENT (a Python regex, before the other arguments) rewrites B's names
first: a template parameter added with a default (session 34's HELP) puts
`Lb0E` in every old instance's name. Prints the kernels
whose SASS differs and a count; exits 1 when any differs or is missing."""
import hashlib
import os
import re
import subprocess
import sys


def functions(path):
    tool = os.environ.get("CUOBJDUMP", "cuobjdump")
    out = subprocess.run([tool, "-sass", path], capture_output=True, text=True,
                         check=True).stdout
    found, name, body = {}, None, []
    for line in out.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            if name:
                found[name] = body
            # anonymous namespaces carry a per-build hash: _GLOBAL__N__<hash>_
            name, body = re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N__", m.group(1)), []
        elif name is not None:
            text = re.sub(r"/\*[0-9a-f]{4,}\*/|/\* 0x[0-9a-f]+ \*/", "", line).strip()
            if text:
                body.append(text)
    if name:
        found[name] = body
    return {k: hashlib.sha1("\n".join(v).encode()).hexdigest() for k, v in found.items()}


def main():
    args = sys.argv[1:]
    rename = None
    if args[:1] == ["--rename"] and len(args) >= 3:
        rename, args = (args[1], args[2]), args[3:]
    if len(args) < 2:
        sys.exit(__doc__)
    a, b = functions(args[0]), functions(args[1])
    if rename:
        b = {re.sub(rename[0], rename[1], k): v for k, v in b.items()}
    want = args[2] if len(args) > 2 else ""
    names = sorted(k for k in set(a) | set(b) if want in k)
    same = [k for k in names if a.get(k) is not None and a.get(k) == b.get(k)]
    for k in names:
        if k not in same:
            where = "differs" if k in a and k in b else ("only in A" if k in a else "only in B")
            print(f"{where}: {k}")
    print(f"{len(same)} of {len(names)} kernels the same")
    sys.exit(0 if len(same) == len(names) else 1)


if __name__ == "__main__":
    main()

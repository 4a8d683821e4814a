#!/usr/bin/env python3
"""The consumer loops of a Hopper attention kernel, counted in its SASS.

    tools/sass_loop.py FILE [--function REGEX]

FILE is a cubin, an object or a library (cuobjdump -sass reads it) or a SASS listing cuobjdump
already wrote. For every function, each innermost loop whose body issues wgmma (HGMMA, or QGMMA for
8-bit inputs) is listed:
its instruction count; the count on the path that takes every forward branch inside it (the path a
tile without a mask takes past its masking code); its HGMMA (QGMMA) by shape; the instructions between the
turn's named barrier (BAR.SYNC) and the first wgmma issue (WARPGROUP.ARRIVE); and how many run
between the wait for S (WARPGROUP.DEPBAR.LE gsb0, 0x1) and the wait for P V (0x0). These are
static counts of the code, not of a run: what docs/14 compares with FlashAttention-3's loops (the
wheel's library holds their SASS).
"""
import argparse
import re
import subprocess
import sys

# The SASS of wgmma: HGMMA for 16-bit inputs, QGMMA for 8-bit ones (e4m3, e5m2).
WGMMA = ("HGMMA", "QGMMA")
INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA(?:\.\S+)?\s+(?:P\d+,\s*)?(0x[0-9a-f]+)")


def functions(text):
    """(name, [(address, instruction text)]) for each function of a cuobjdump -sass listing."""
    for part in re.split(r"^\s*Function : ", text, flags=re.M)[1:]:
        name, _, body = part.partition("\n")
        code = []
        for line in body.split("\n"):
            m = INSTR.match(line)
            if m:
                code.append((int(m.group(1), 16), m.group(2)))
        yield name.strip(), code


def opcode(ins):
    words = ins.split()
    return words[1] if words[0].startswith("@") else words[0]


def loops(code):
    """Innermost loops that issue wgmma: (first index, last index) of each body, the back-branch last."""
    index = {a: i for i, (a, _) in enumerate(code)}
    found = []
    for i, (a, ins) in enumerate(code):
        m = BRANCH.search(ins)
        # a loop's back-branch is conditional; an unconditional one returns from an out-of-line
        # retry of an mbarrier wait into the code it left
        if not m or not ins.startswith("@") or opcode(ins).startswith("BRA.U"):
            continue
        target = int(m.group(1), 16)
        if target < a and target in index:
            j = index[target]
            hgmma = sum(opcode(x).startswith(WGMMA) for _, x in code[j:i + 1])
            if hgmma:
                found.append((j, i, hgmma))
    # the innermost: no other such loop inside
    keep = [(j, i) for j, i, _ in found if not any(j <= j2 and i2 <= i and (j2, i2) != (j, i) for j2, i2, _ in found)]
    return sorted(set(keep))


def fast_path(code, j, i):
    """Instructions of body j..i on the path that takes every forward branch inside the body."""
    index = {a: k for k, (a, _) in enumerate(code)}
    skipped = set()
    for k in range(j, i):
        m = BRANCH.search(code[k][1])
        if m:
            target = int(m.group(1), 16)
            t = index.get(target)
            if t is not None and k < t <= i:
                skipped.update(range(k + 1, t))
    return (i - j + 1) - len(skipped)


def first(body, pred):
    return next((k for k, (_, x) in enumerate(body) if pred(x)), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--function", default="", help="only functions whose mangled name matches this regex")
    args = ap.parse_args()
    with open(args.file, "rb") as f:
        head = f.read(4)
    if head == b"\x7fELF":
        text = subprocess.run(["cuobjdump", "-sass", args.file], check=True, capture_output=True, text=True).stdout
    else:
        with open(args.file) as f:
            text = f.read()
    printed = 0
    for number, (name, code) in enumerate(functions(text), 1):
        if not re.search(args.function, name):
            continue
        print(f"function {number}: {name}")
        for j, i in loops(code):
            body = code[j:i + 1]
            shapes = {}  # mnemonic -> shape -> count
            for _, x in body:
                if opcode(x).startswith(WGMMA):
                    mnemonic, shape = opcode(x).split(".")[:2]
                    shapes.setdefault(mnemonic, {})
                    shapes[mnemonic][shape] = shapes[mnemonic].get(shape, 0) + 1
            sync = first(body, lambda x: opcode(x).startswith("BAR.SYNC"))
            arrive = first(body, lambda x: opcode(x) == "WARPGROUP.ARRIVE")
            wait_s = first(body, lambda x: "DEPBAR.LE gsb0, 0x1" in x)
            wait_pv = first(body, lambda x: "DEPBAR.LE gsb0, 0x0" in x)
            turn = arrive - sync if sync is not None and arrive is not None and arrive > sync else None
            between = wait_pv - wait_s if wait_s is not None and wait_pv is not None and wait_pv > wait_s else None
            print(f"  loop {code[j][0]:#x}-{code[i][0]:#x}: {len(body)} instructions, "
                  f"{fast_path(code, j, i)} on the path past forward branches; "
                  + "; ".join(m + " " + ", ".join(f"{n} x {s}" for s, n in sorted(shapes[m].items())) for m in sorted(shapes))
                  + f"; turn barrier to first wgmma: {turn if turn is not None else '-'}"
                  + f"; S wait to P V wait: {between if between is not None else '-'}")
            printed += 1
    if not printed:
        sys.exit("sass_loop: no loop that issues wgmma" + (f" in a function matching {args.function}" if args.function else ""))


if __name__ == "__main__":
    main()

"""Lints of the prose of README.md and docs/*.md that tests/test_docs.sh runs (no GPU needed):

  figures   a measured-looking figure (TFLOP/s, a percentage, a ratio like 1.20x, a bold number,
            or one spelled out as a fraction: "an eighth faster", "nine tenths of", "two
            hundredths") outside the blocks and <!-- fig --> markers that tools/results_md.py fills
            from the CSVs. Such a figure was typed by hand and drifts from the data. A line that
            states a fact that is not a measurement of this project (a datasheet rate, a published
            number, arithmetic) says so with <!-- not a measurement: why -->.
  process   words of the team's process that mean nothing to a reader (DESIGN.md, "the lent H200",
            issue numbers, "the GPU machine", "the stretch target", "as the last note said"), in
            every tracked text file.
  links     every stage's chapter, and its assignment's reading list, links what the stage follows:
            the part of the blog series (lubits.ch/flash) for stages 01-08; the PTX ISA
            (docs.nvidia.com/cuda/parallel-thread-execution) for the Hopper track, the stages whose
            kernel.cu says "Needs: sm_90a", which go past where the series ends.

Usage: tests/lint_docs.py [--root DIR]   (DIR: the tree to lint, by default this repository;
tests/test_docs.sh lints small trees of its own with it, to see each lint fail).
Prints PASS:/FAIL: lines; exits 1 if any failed."""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from results_md import GENERATED_REGION  # noqa: E402  (it puts plots/ on the path)
from plot import HOPPER_ARCH, stage_archs  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--root", default=ROOT, help="the tree to lint (default: this repository)")
TREE = os.path.abspath(ap.parse_args().root)

failures = 0


def report(name, problems):
    global failures
    if problems:
        failures += 1
        print(f"FAIL: {name}: {len(problems)} found: " + "; ".join(problems[:6]))
    else:
        print(f"PASS: {name}")


FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:TFLOP/s|%)|(?<![\w.])\d+\.\d+x\b|\*\*\d+(?:\.\d+)?\*\*")
# A fraction in words: plural denominators are always fractions ("nine tenths", "two hundredths");
# a singular one is a fraction when a comparison or "of" follows ("an eighth faster", "a third of"),
# and an ordinal otherwise ("a third consumer").
_DENOMINATORS = "third|quarter|fifth|sixth|seventh|eighth|ninth|tenth|twelfth|twentieth|hundredth|thousandth"
_COUNTS = "two|three|four|five|six|seven|eight|nine|ten|eleven|a few|several"
SPELLED_FIGURE = re.compile(
    rf"\b(?:{_COUNTS})[ -](?:{_DENOMINATORS.replace('|', 's|')}s)\b"
    rf"|\b(?:a|an|one)[ -](?:{_DENOMINATORS})\s+(?:of|more|less|fewer|faster|slower|above|below|ahead|behind|short"
    rf"|lower|higher|longer|shorter|better|worse|off|up|down|over|under|the)\b", re.I)


def prose_lines(text):
    """(line number, line) of the text outside generated blocks and fenced code, with inline code
    spans removed: what a person typed."""
    def blank(m):
        return "\n" * m.group(0).count("\n")
    text = GENERATED_REGION.sub(blank, text)
    text = re.sub(r"```.*?```", blank, text, flags=re.S)
    for n, line in enumerate(text.split("\n"), 1):
        yield n, re.sub(r"`[^`]*`", "", line)


pages = [os.path.join(TREE, "README.md")] + sorted(glob.glob(os.path.join(TREE, "docs", "*.md")))
problems = []
for path in pages:
    for n, line in prose_lines(open(path).read()):
        if "<!-- not a measurement:" in line:
            continue
        for pattern in (FIGURE, SPELLED_FIGURE):
            for m in pattern.finditer(line):
                problems.append(f"{os.path.relpath(path, TREE)}:{n}: '{m.group(0)}'")
report("README and docs carry no hand-typed measured figure, in digits or in words (all come from the CSVs "
       "through tools/results_md.py)", problems)

tracked = subprocess.run(["git", "ls-files"], cwd=TREE, capture_output=True, text=True).stdout.split()
if not tracked:  # a copy without git
    tracked = [os.path.relpath(p, TREE) for p in glob.glob(os.path.join(TREE, "**", "*"), recursive=True)
               if os.path.isfile(p) and "/build/" not in p]
PROCESS = re.compile(r"DESIGN\.md|ANCHORS\.md|HOPPER\.md|\blent\b|\bissue \d|\(issue|\bthe team\b|\bCEO\b"
                     r"|\bGPU machine\b|\bmachine kind\b|\bsitting at\b|\bmeant to reach\b|\bstretch target\b"
                     r"|\basked (?:there|for here)\b|\bthe last note\b|\bdid not come back\b", re.I)
problems = []
for rel in tracked:
    if rel.endswith((".png", ".csv")) or rel == "tests/lint_docs.py":
        continue
    try:
        text = open(os.path.join(TREE, rel), encoding="utf-8").read()
    except (UnicodeDecodeError, OSError):
        continue
    for n, line in enumerate(text.split("\n"), 1):
        m = PROCESS.search(line)
        if m:
            problems.append(f"{rel}:{n}: '{m.group(0)}'")
report("no words of the team's process in the product (DESIGN.md, 'lent', issue numbers, 'the GPU machine', ...)", problems)

# Stages 01-08 follow the blog series part by part; the Hopper track goes past where it ends, so
# its chapters cite the reference of the instructions they introduce instead. Which stage is on
# which track comes from its kernel.cu header, by the rule the Makefile and plots/plot.py use.
BLOG = ("lubits.ch/flash", "the blog series")
PTX_ISA = ("docs.nvidia.com/cuda/parallel-thread-execution", "the PTX ISA")
archs = stage_archs(TREE)


def wanted_link(nn):
    return PTX_ISA if archs.get(f"kernel{nn}") == HOPPER_ARCH else BLOG


problems = []
for d in sorted(glob.glob(os.path.join(TREE, "kernel[0-9][0-9]_*"))):
    nn = os.path.basename(d)[6:8]
    chapters = glob.glob(os.path.join(TREE, "docs", nn + "_*.md"))
    link, what = wanted_link(nn)
    if not chapters:
        problems.append(f"stage {nn} has no chapter docs/{nn}_*.md")
    elif link not in open(chapters[0]).read():
        problems.append(f"{os.path.relpath(chapters[0], TREE)} does not link {what} ({link})")
assignments = open(os.path.join(TREE, "docs", "assignments.md")).read()
for m in re.finditer(r"^## Assignment (\d\d) .*?(?=^## |\Z)", assignments, re.S | re.M):
    link, what = wanted_link(m.group(1))
    if link not in m.group(0):
        problems.append(f"docs/assignments.md: assignment {m.group(1)}'s reading list does not link {what} ({link})")
report("every chapter and every assignment's reading list links what its stage follows "
       "(the blog series; the PTX ISA on the Hopper track)", problems)
sys.exit(1 if failures else 0)

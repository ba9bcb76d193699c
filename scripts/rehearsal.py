#!/usr/bin/env python3
"""The rehearsal: the seeds' real commands through the Docker runtime on faithful stand-in
images (see scripts/rehearsal.sh for usage). Prepares a plan from the seed data, tags a
stand-in image under every image name the plan uses (human tags as ISO-Bench human images,
baselines as ISO-Bench baselines, each at the commit's vLLM version), writes a small
agent patch per commit and a small ShareGPT file, runs the sweep headless, and prints one
summary line."""

import argparse
import random
import collections
import json
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Dependency faults the seed reports name, as the stand-in's failure modes. Only faults
# with a fix recipe: the point is to exercise the fixes.
FAULTS = {"aimv2_conflict": "aimv2", "numpy_abi": "numpy"}
DEFAULT_VERSION = "0.8.5"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def select(blocks, limit):
    """A spread of `limit` commits across the list (every k-th), so a short cut still
    covers every era and kind."""
    if not limit or limit >= len(blocks):
        return blocks
    step = len(blocks) / limit
    return [blocks[int(i * step)] for i in range(limit)]


def prepare_plan(ns, seeds, d, limit):
    plan = os.path.join(d, "plan.toml")
    run([ns, "plan", "import", "--from", "seed-json", seeds, "-o", plan], stdout=subprocess.DEVNULL)
    text = open(plan).read()
    head, *blocks = text.split("\n[[commits]]\n")
    blocks = select(blocks, limit)
    # No vLLM clone on this box: the scripts come from each image's own copy.
    head = re.sub(r'(?m)^vllm_src = .*\n', "", head)
    # No Hub here: the stand-in needs no weights, and vLLM's own fetch is not exercised.
    head = re.sub(r'(?m)^on_invalid = (.*)$', r'on_invalid = \1\nfetch_weights = false', head)
    head = re.sub(r'(?m)^hf_cache = .*$', f'hf_cache = "{d}/hf"', head)
    head = re.sub(r'(?m)^server_start_timeout_s = .*$', "server_start_timeout_s = 120", head)
    head = re.sub(r'(?m)^run_timeout_s = .*$', "run_timeout_s = 600", head)
    head = re.sub(r'(?m)^timeout_s_by_gpus = .*$', 'timeout_s_by_gpus = { "8" = 600 }', head)
    head = re.sub(r'(?m)^sharegpt = .*$', f'sharegpt = "{d}/ShareGPT_V3_unfiltered_cleaned_split.json"', head)
    open(plan, "w").write("\n[[commits]]\n".join([head] + blocks))
    os.makedirs(os.path.join(d, "hf"), exist_ok=True)
    return plan


# The seeds whose baseline images were never built (their parents' wheels were gone).
MISSING_BASELINE = {"S3 WHEEL 404 ERRORS", "WHEEL INSTALL FAILED VIA S3 404"}


def git(clone, *args, **kw):
    env = dict(os.environ, GIT_AUTHOR_NAME="rehearsal", GIT_AUTHOR_EMAIL="r@r",
               GIT_COMMITTER_NAME="rehearsal", GIT_COMMITTER_EMAIL="r@r")
    return subprocess.run(["git", "-C", clone, *args], check=True, capture_output=True, text=True, env=env, **kw).stdout.strip()


def missing_baselines(ns, plan, seeds, d):
    """For the seeds whose baselines were never built: a vLLM clone in which each has a
    parent and a commit (the seeds' real history is not here), with the plan's hashes
    pointed at them. Two in three differ only in Python files (the runtime must derive the
    baseline by overlay); every third also adds a kernel under csrc/ (it must build the
    baseline from source: the parent is an installable project at the commit's version).
    The baseline images are left out. Returns the commits."""
    lacking = [s["commit"] for s in json.load(open(seeds)) if s.get("seed_category") in MISSING_BASELINE]
    shown = subprocess.run([ns, "plan", "show", plan, "--json"], check=True, capture_output=True, text=True).stdout
    versions = {}
    for r in (json.loads(l) for l in shown.splitlines() if l.strip()):
        fits = r.get("fits_vllm") or []
        versions.setdefault(r["commit"], r.get("vllm_version") or (fits[-1] if fits else DEFAULT_VERSION))
    clone = os.path.join(d, "vllm-clone")
    subprocess.run(["rm", "-rf", clone], check=True)
    os.makedirs(os.path.join(clone, "vllm", "worker"))
    git(clone, "init", "-q")
    text = open(plan).read()
    head, *blocks = text.split("\n[[commits]]\n")
    chosen = []
    for i, b in enumerate(blocks):
        m = re.search(r'(?m)^commit = "([0-9a-f]+)"', b)
        if not m or not any(m.group(1).startswith(c) or c.startswith(m.group(1)) for c in lacking):
            continue
        runner = os.path.join(clone, "vllm", "worker", "model_runner.py")
        # The parent holds what the stand-in images hold, so agent patches still apply.
        open(runner, "w").write("# model_runner\n")
        version = next((v for c, v in versions.items() if c.startswith(m.group(1)) or m.group(1).startswith(c)), DEFAULT_VERSION)
        open(os.path.join(clone, "setup.py"), "w").write("from setuptools import setup\nsetup()\n")
        open(os.path.join(clone, "vllm", "__init__.py"), "w").write("")
        open(os.path.join(clone, "vllm", "version.py"), "w").write(f'__version__ = "{version}"\n')
        kernel = os.path.join(clone, "csrc", f"k_{m.group(1)}.cu")
        if os.path.exists(kernel):
            os.remove(kernel)
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "--allow-empty", "-m", f"parent of {m.group(1)}")
        parent = git(clone, "rev-parse", "HEAD")
        open(runner, "w").write(f"# model_runner, as {m.group(1)} made it\n")
        open(os.path.join(clone, "vllm", f"added_by_{m.group(1)}.py"), "w").write("X = 1\n")
        if len(chosen) % 3 == 2:
            os.makedirs(os.path.dirname(kernel), exist_ok=True)
            open(kernel, "w").write("// a kernel: this baseline needs a build\n")
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", m.group(1))
        commit = git(clone, "rev-parse", "HEAD")
        os.remove(os.path.join(clone, "vllm", f"added_by_{m.group(1)}.py"))
        b = re.sub(r'(?m)^commit = ".*"$', f'commit = "{commit}"', b)
        b = re.sub(r'(?m)^parent = ".*"\n', "", b)
        b = re.sub(r'(?m)^(commit = ".*")$', f'\\1\nparent = "{parent}"', b)
        blocks[i] = b
        chosen.append(commit)
    head = re.sub(r'(?m)^(on_invalid = .*)$', f'\\1\nvllm_src = "{clone}"', head)
    open(plan, "w").write("\n[[commits]]\n".join([head] + blocks))
    return chosen


def sharegpt(d):
    rows = []
    words = "the night shift benchmarks every variant of each commit with the same command".split()
    for i in range(64):
        q = " ".join(words[(i + j) % len(words)] for j in range(8 + i % 24))
        a = " ".join(words[(i * 3 + j) % len(words)] for j in range(16 + (i * 7) % 48))
        rows.append({"id": f"r{i}", "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]})
    # One-turn conversations are filtered out by the real client; keep one to prove it.
    rows.append({"id": "short", "conversations": [{"from": "human", "value": "hi"}]})
    json.dump(rows, open(os.path.join(d, "ShareGPT_V3_unfiltered_cleaned_split.json"), "w"))


def agent_patch(d, commit8):
    """A small patch that applies to the baseline tree (`patch -p1` in /opt/vllm_baseline)."""
    p = os.path.join(d, "runs", "claude_code", commit8, "model_patch.diff")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "w").write(
        "--- a/vllm/worker/model_runner.py\n"
        "+++ b/vllm/worker/model_runner.py\n"
        "@@ -1 +1,2 @@\n"
        " # model_runner\n"
        f"+# tuned by claude_code for {commit8}\n"
    )


def hub_dataset(d, ds_id):
    """A Hub dataset as a box that fetched it has it: in the HF cache layout (the mounted
    hf_cache), which the client's loader reads offline."""
    snap = os.path.join(d, "hf", "hub", "datasets--" + ds_id.replace("/", "--"), "snapshots", "0" * 40)
    os.makedirs(snap, exist_ok=True)
    src = os.path.join(d, "ShareGPT_V3_unfiltered_cleaned_split.json")
    with open(os.path.join(snap, "train.json"), "w") as f:
        f.write(open(src).read())


def images(ns, plan, d, faults, leave_out=()):
    out = subprocess.run([ns, "plan", "show", plan, "--json"], check=True, capture_output=True, text=True).stdout
    runs = [json.loads(l) for l in out.splitlines() if l.strip()]
    wanted = {}  # image → (family, version, fail)
    for r in runs:
        for ds in (r.get("invocation") or {}).get("hub_datasets") or []:
            hub_dataset(d, ds)
        if r["variant"].startswith("agent"):
            agent_patch(d, r["commit"][:8])
        if r["skip_reason"] or not r["image"]:
            continue
        if r["commit"] in leave_out and r["variant"] != "human":
            continue
        family = "baseline" if r["variant"] != "human" else "human"
        # No version in the data: the newest era whose client and server take the
        # command as written (the operator wrote it for some real era).
        fits = r.get("fits_vllm") or []
        version = r.get("vllm_version") or (fits[-1] if fits else DEFAULT_VERSION)
        fail = ""
        sim = r.get("sim") or {}
        mode = FAULTS.get(sim.get("fail") or "")
        if faults and mode:
            vs = sim.get("variants") or []
            base = "agent" if r["variant"].startswith("agent") else r["variant"]
            if not vs or base in vs or r["variant"] in vs:
                fail = mode
        key = r["image"]
        if key in wanted and wanted[key] != (family, version, fail):
            # Shared by several commits (a baseline of one parent): first one wins.
            continue
        wanted[key] = (family, version, fail)
    groups = collections.defaultdict(list)
    for img, spec in wanted.items():
        groups[spec].append(img)
    t = time.time()
    for (family, version, fail), tags in sorted(groups.items()):
        cmd = [os.path.join(REPO, "scripts", "standin-image.sh"), "--family", family, "--version", version]
        if fail:
            cmd += ["--fail", fail]
        run(cmd + sorted(tags), stdout=subprocess.DEVNULL)
    print(f"rehearsal: {len(wanted)} image names tagged from {len(groups)} stand-in images in {time.time() - t:.1f} s", file=sys.stderr)
    return runs


def summary(ns, store, runs):
    out = subprocess.run([ns, "results", "--store", store, "--format", "jsonl"], check=True, capture_output=True, text=True).stdout
    recs = json.loads(out) if out.strip().startswith("[") else [json.loads(l) for l in out.splitlines() if l.strip()]
    last = {}
    for r in recs:
        k = r["key"]
        if k not in last or r["attempt"] >= last[k]["attempt"]:
            last[k] = r
    by_commit = collections.defaultdict(list)
    for r in runs:
        by_commit[r["commit"]].append(r)
    runnable = [c for c, rs in by_commit.items() if all(not r["skip_reason"] for r in rs)]
    complete = [c for c in runnable if all(last.get(r["key"], {}).get("status") == "success" for r in by_commit[c])]
    status = collections.Counter()
    cats = collections.Counter()
    for r in runs:
        rec = last.get(r["key"])
        st = rec["status"] if rec else ("skipped" if r["skip_reason"] else "queued")
        status[st] += 1
        if st == "failed":
            cats[rec.get("category") or "other"] += 1
    cat_text = ", ".join(f"{c}={n}" for c, n in sorted(cats.items(), key=lambda x: (-x[1], x[0])))
    line = (f"rehearsal: {len(complete)}/{len(runnable)} runnable commits with a complete 3-way result; "
            f"runs: {status['success']} success, {status['failed']} failed ({cat_text}), {status['skipped']} skipped")
    return line, len(complete), len(runnable), [c for c in runnable if c not in complete], last, by_commit


def plan_name(plan):
    for l in open(plan):
        if l.startswith("name"):
            return l.split("=", 1)[1].strip().strip('"')
    return ""


def containers_of(sweep):
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nightshift.sweep={sweep}"],
                         check=True, capture_output=True, text=True).stdout
    return len(out.split())


def kill_loop(argv, log, kills):
    """SIGKILL the sweep's daemon at seeded random moments (each time after a container of
    it is up, so there is something to orphan), resuming each time."""
    rng = random.Random(9)
    done = 0
    while done < kills:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(rng.uniform(2.0, 12.0))
        if p.poll() is not None:
            break
        p.kill()
        p.wait()
        done += 1
    return done


def main():
    ap = argparse.ArgumentParser(prog="scripts/rehearsal.sh")
    ap.add_argument("store_dir", nargs="?")
    ap.add_argument("--faults", action="store_true", help="images carry the dependency faults the seed reports name")
    ap.add_argument("--limit", type=int, default=int(os.environ.get("REHEARSAL_LIMIT", "0")), help="only N commits, spread across the list")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every runnable commit has a complete 3-way result")
    ap.add_argument("--missing-baselines", action="store_true", help="leave out the baseline images the seeds lacked; they must be derived")
    ap.add_argument("--kills", type=int, default=0, help="SIGKILL the sweep's daemon N times at random moments, resuming each time; then count orphan containers, lost and duplicated runs")
    ap.add_argument("--seeds", default=os.path.join(REPO, "..", "shared", "data", "seed-commits.json"))
    a = ap.parse_args()
    ns = os.path.join(REPO, "target", "debug", "nightshift")
    d = os.path.abspath(a.store_dir or os.path.join("/tmp", f"nightshift-rehearsal-{os.getpid()}"))
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    plan = prepare_plan(ns, a.seeds, d, a.limit)
    sharegpt(d)
    leave_out = missing_baselines(ns, plan, a.seeds, d) if a.missing_baselines else []
    runs = images(ns, plan, d, a.faults, set(leave_out))
    store = os.path.join(d, "store")
    log = open(os.path.join(d, "sweep.log"), "w")
    # No disk headroom: a missing image is sized at a real vLLM image's 20 GB before its
    # pull is tried (and fails here, so it is derived), and the default 25 GB headroom on
    # top of that would pause the sweep on a CI machine with less than 45 GB free. The
    # disk budget has tests of its own (tests/registry.rs, src/images.rs).
    argv = [ns, "run", plan, "--headless", "--runtime", "docker", "--store", store, "--gpus", "8",
            "--disk-min-free-gb", "0"]
    kills = kill_loop(argv, log, a.kills) if a.kills else 0
    rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT).returncode
    line, done, total, missing, last, by_commit = summary(ns, store, runs)
    print(f"rehearsal: sweep exit {rc}, {time.time() - t0:.0f} s wall; plan, store and logs in {d}", file=sys.stderr)
    for c in missing:
        for r in by_commit[c]:
            rec = last.get(r["key"]) or {}
            if rec.get("status") != "success":
                print(f"  {r['key']}: {rec.get('status', 'not run')} {rec.get('category') or ''} {(rec.get('error') or '')[:200]}", file=sys.stderr)
    if a.missing_baselines:
        def made(how):
            return {r["commit"] for r in last.values()
                    if r["variant"] == "baseline" and how in (r["provenance"].get("other") or {}).get("image_origin", "")}
        overlaid, built = made("derived by overlay"), made("built from source")
        line += f"; baselines derived: {len(overlaid | built)}/{len(leave_out)} ({len(overlaid)} overlay, {len(built)} built from source)"
    bad = False
    if a.kills:
        orphans = containers_of(plan_name(plan))
        recs = subprocess.run([ns, "results", "--store", store, "--format", "jsonl"], check=True,
                              capture_output=True, text=True).stdout.splitlines()
        attempts = collections.Counter((r["key"], r["attempt"]) for r in map(json.loads, filter(str.strip, recs)))
        duplicated = sum(1 for n in attempts.values() if n > 1)
        lost = sum(1 for r in runs if not r["skip_reason"] and last.get(r["key"], {}).get("status") not in ("success", "failed"))
        line += f"; kill -9 x{kills}: {orphans} orphan containers, {lost} runs lost, {duplicated} attempts duplicated"
        bad = orphans > 0 or lost > 0 or duplicated > 0
    print(line)
    if a.check and (done < total or bad):
        sys.exit(1)


if __name__ == "__main__":
    main()

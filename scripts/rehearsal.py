#!/usr/bin/env python3
"""The rehearsal: the seeds' real commands through the Docker runtime on faithful stand-in
images (see scripts/rehearsal.sh for usage). Prepares a plan from the seed data, tags a
stand-in image under every image name the plan uses (human tags as ISO-Bench human images
calling themselves 0.0.0+local, baselines as ISO-Bench baselines, each at the era the
fixture clone's history gives the commit), writes the agents' patches as a box has them
(some absent, some stale) and a small ShareGPT file, stands in a Hub holding the seed models
(rehearsal/models.json), runs the preflight and then the sweep headless (which preflights
again and skips what is blocked), and prints one summary line (rehearsal/fixture.py)."""

import argparse
import random
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "rehearsal"))
import fixture  # noqa: E402

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
    # No Hub weights here: the stand-in needs none (it reads config.json and the index).
    head = re.sub(r'(?m)^on_invalid = (.*)$', r'on_invalid = \1\nfetch_weights = false', head)
    head = re.sub(r'(?m)^hf_cache = .*$', f'hf_cache = "{d}/hf"', head)
    head = re.sub(r'(?m)^vllm_src = .*$', f'vllm_src = "{d}/vllm-clone"', head)
    head = re.sub(r'(?m)^server_start_timeout_s = .*$', "server_start_timeout_s = 120", head)
    head = re.sub(r'(?m)^run_timeout_s = .*$', "run_timeout_s = 600", head)
    head = re.sub(r'(?m)^timeout_s_by_gpus = .*$', 'timeout_s_by_gpus = { "8" = 600 }', head)
    head = re.sub(r'(?m)^sharegpt = .*$', f'sharegpt = "{d}/ShareGPT_V3_unfiltered_cleaned_split.json"', head)
    open(plan, "w").write("\n[[commits]]\n".join([head] + blocks))
    return plan


# The seeds whose baseline images were never built (their parents' wheels were gone, or
# ISO-Bench lists the baseline as missing).
MISSING_BASELINE = {"S3 WHEEL 404 ERRORS", "WHEEL INSTALL FAILED VIA S3 404"}


def history(plan, seeds, d, missing_baselines):
    """Every commit of the plan placed in the fixture clone after the release tag of its
    era (seed facts, else a seeded era), with the plan's hashes pointed at it. Seeds whose
    baselines were never built are left without one: two in three differ only in Python
    files (derived by overlay), every third adds a kernel (built from source). Returns
    (original commit → era tag, the commits whose baselines are left out)."""
    facts = {s["commit"]: s for s in json.load(open(seeds))}

    def seed_of(c):
        return next((s for k, s in facts.items() if c.startswith(k) or k.startswith(c)), {})

    text = open(plan).read()
    head, *blocks = text.split("\n[[commits]]\n")
    entries, eras, lacking = [], {}, []
    for b in blocks:
        m = re.search(r'(?m)^commit = "([0-9a-f]+)"', b)
        s = seed_of(m.group(1))
        tag = fixture.era_of(s.get("vllm_version"), m.group(1))
        lack = missing_baselines and (s.get("seed_category") in MISSING_BASELINE
                                      or s.get("baseline_image_status") in ("missing", "permanently_failed"))
        entries.append({"key": m.group(1), "tag": tag, "kernel": lack and len(lacking) % 3 == 2})
        eras[m.group(1)] = tag
        if lack:
            lacking.append(m.group(1))
    made = fixture.build_clone(os.path.join(d, "vllm-clone"), entries)
    out = []
    for b in blocks:
        key = re.search(r'(?m)^commit = "([0-9a-f]+)"', b).group(1)
        commit, parent = made[key]
        b = re.sub(r'(?m)^commit = ".*"$', f'commit = "{commit}"', b)
        b = re.sub(r'(?m)^parent = ".*"\n', "", b)
        b = re.sub(r'(?m)^(commit = ".*")$', f'\\1\nparent = "{parent}"', b)
        out.append(b)
        eras[commit] = eras.pop(key)
        if key in lacking:
            lacking[lacking.index(key)] = commit
    open(plan, "w").write("\n[[commits]]\n".join([head] + out))
    return eras, lacking


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


def images(ns, plan, d, faults, eras, leave_out=()):
    """A stand-in image under every image name the plan uses, at the era the clone gives
    the commit (human images call themselves 0.0.0+local, as ISO-Bench's do); the agents'
    patches as the box has them. Hub datasets are not pre-cached."""
    out = subprocess.run([ns, "plan", "show", plan, "--json"], check=True, capture_output=True, text=True).stdout
    runs = [json.loads(l) for l in out.splitlines() if l.strip()]
    order = {c: i for i, c in enumerate(dict.fromkeys(r["commit"] for r in runs))}
    wanted = {}  # image → (family, version, fail)
    for r in runs:
        full = next((c for c in eras if c.startswith(r["commit"])), r["commit"])
        if r["variant"].startswith("agent"):
            fixture.agent_patch(d, full[:8], fixture.patch_mode(order[r["commit"]]))
        if r["skip_reason"] or not r["image"]:
            continue
        if full in leave_out and r["variant"] != "human":
            continue
        family = "baseline" if r["variant"] != "human" else "human"
        version = eras.get(full, DEFAULT_VERSION)
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
        if family == "human":
            cmd += ["--report-version", "0.0.0+local"]
        if fail:
            cmd += ["--fail", fail]
        run(cmd + sorted(tags), stdout=subprocess.DEVNULL)
    print(f"rehearsal: {len(wanted)} image names tagged from {len(groups)} stand-in images in {time.time() - t:.1f} s", file=sys.stderr)
    return runs


# What preflight can know before the night: a commit failing with one of these during the
# night is a preflight miss (--check fails on it).
KNOWABLE = {"agent_patch_failed", "image_not_found", "model_not_found", "model_too_large",
            "model_arch_unsupported", "rope_scaling_incompatible", "bench_command_invalid",
            "gated_model_auth"}


def summary(ns, store, runs, plan):
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
    # Every commit with a command counts; the plan's own refusals are named before the
    # night like preflight's.
    with_cmd = [c for c, rs in by_commit.items() if any(r.get("perf_command") for r in rs)]

    def skipped(r):
        rec = last.get(r["key"])
        return (rec or {}).get("status") == "skipped" or (rec is None and r["skip_reason"])

    complete = [c for c in with_cmd if all((last.get(r["key"]) or {}).get("status") == "success" for r in by_commit[c])]
    named = [c for c in with_cmd if c not in complete and any(skipped(r) for r in by_commit[c])]
    failed = [c for c in with_cmd if c not in complete and c not in named]
    status = collections.Counter()
    for r in runs:
        rec = last.get(r["key"])
        status[rec["status"] if rec else ("skipped" if r["skip_reason"] else "queued")] += 1
    fcats = collections.Counter()
    why = {}
    for c in failed:
        recs_c = [last.get(r["key"]) or {} for r in by_commit[c]]
        cat = next((x.get("category") or "other" for x in recs_c if x.get("status") == "failed"),
                   "not run")
        fcats[cat] += 1
        why[c] = cat
    cat_text = ", ".join(f"{c}={n}" for c, n in sorted(fcats.items(), key=lambda x: (-x[1], x[0])))
    line = (f"rehearsal: {len(complete)}/{len(with_cmd)} runnable commits with a complete 3-way result; "
            f"named before the night: {len(named)}; failed during the night: {len(failed)} ({cat_text}); "
            f"runs: {status['success']} success, {status['failed']} failed, {status['skipped']} skipped")
    return line, complete, with_cmd, named, failed, why, last, by_commit


def plan_name(plan):
    for l in open(plan):
        if l.startswith("name"):
            return l.split("=", 1)[1].strip().strip('"')
    return ""


def containers_of(sweep):
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=nightshift.sweep={sweep}"],
                         check=True, capture_output=True, text=True).stdout
    return len(out.split())


def kill_loop(argv, log, kills, env):
    """SIGKILL the sweep's daemon at seeded random moments (each time after a container of
    it is up, so there is something to orphan), resuming each time."""
    rng = random.Random(9)
    done = 0
    while done < kills:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
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
    ap.add_argument("--no-faults", action="store_true", help="images without the dependency faults the seed reports name")
    ap.add_argument("--limit", type=int, default=int(os.environ.get("REHEARSAL_LIMIT", "0")), help="only N commits, spread across the list")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every commit is accounted for and none failed during the night for a reason preflight can know")
    ap.add_argument("--no-missing-baselines", action="store_true", help="give every commit its baseline image (the seeds lacked some)")
    ap.add_argument("--kills", type=int, default=0, help="SIGKILL the sweep's daemon N times at random moments, resuming each time; then count orphan containers, lost and duplicated runs")
    ap.add_argument("--room-gb", type=int, help="a box short of disk: the sweep keeps free all but N GB of Docker's disk (--disk-min-free-gb), so every missing image's 20 GB guess is short of room")
    ap.add_argument("--seeds", default=os.path.join(REPO, "..", "shared", "data", "seed-commits.json"))
    a = ap.parse_args()
    ns = os.environ.get("NIGHTSHIFT_BIN") or os.path.join(REPO, "target", "debug", "nightshift")
    d = os.path.abspath(a.store_dir or os.path.join("/tmp", f"nightshift-rehearsal-{os.getpid()}"))
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    plan = prepare_plan(ns, a.seeds, d, a.limit)
    sharegpt(d)
    eras, leave_out = history(plan, a.seeds, d, not a.no_missing_baselines)
    fixture.hf_cache(os.path.join(d, "hf", "hub"))
    runs = images(ns, plan, d, not a.no_faults, eras, set(leave_out))
    hub = fixture.start_hub()
    env = dict(os.environ, HF_ENDPOINT=hub, HF_TOKEN=fixture.TOKEN, XDG_CACHE_HOME=os.path.join(d, "cache"))
    pre = subprocess.run([ns, "preflight", plan, "--gpus", "8"], env=env, capture_output=True, text=True)
    open(os.path.join(d, "preflight.txt"), "w").write(pre.stdout + pre.stderr)
    pre_line = next((l for l in pre.stdout.splitlines() if l.startswith("preflight:")), "preflight: (no summary)")
    print(f"rehearsal: {pre_line} (full table in {d}/preflight.txt)", file=sys.stderr)
    # From named to fixed: the fixes preflight knows, accepted as they are (an operator
    # would review them), applied to every variant of their commits.
    sug = subprocess.run([ns, "preflight", plan, "--gpus", "8", "--suggest"], env=env, capture_output=True, text=True)
    open(os.path.join(d, "suggest.txt"), "w").write(sug.stdout + sug.stderr)
    fixes_file = os.path.splitext(plan)[0] + ".fixes.toml"
    fixed = set()
    if sug.returncode == 0 and os.path.exists(fixes_file):
        fixed = set(re.findall(r'(?m)^commit = "([0-9a-f]+)"', open(fixes_file).read()))
    print(f"rehearsal: preflight --suggest: {len(fixed)} commits fixed before the night ({d}/suggest.txt)", file=sys.stderr)
    store = os.path.join(d, "store")
    log = open(os.path.join(d, "sweep.log"), "w")
    # No disk headroom: a missing image is sized at a real vLLM image's 20 GB before its
    # pull is tried (and fails here, so it is derived), and the default 25 GB headroom on
    # top of that would pause the sweep on a CI machine with less than 45 GB free. The
    # disk budget has tests of its own (tests/registry.rs, src/images.rs).
    floor = 0
    if a.room_gb is not None:
        root = "/var/lib/docker" if os.path.isdir("/var/lib/docker") else "/"
        floor = max(0, shutil.disk_usage(root).free // 10**9 - a.room_gb)
    argv = [ns, "run", plan, "--headless", "--runtime", "docker", "--store", store, "--gpus", "8",
            "--disk-min-free-gb", str(floor)] + (["--fixes", fixes_file] if fixed else [])
    kills = kill_loop(argv, log, a.kills, env) if a.kills else 0
    rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    stops = []
    while rc not in (0, 3) and len(stops) < 2:
        # The sweep stopped itself (a store or disk failure says why and exits 1): what an
        # operator does next is resume it. Said below, with the reason, never hidden.
        stops.append(rc)
        log.flush()
        rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    line, complete, with_cmd, named, failed, why, last, by_commit = summary(ns, store, runs, plan)
    fixed_done = [c for c in complete if any(c.startswith(f) or f.startswith(c) for f in fixed)]
    line = line.replace("; named before the night:", f"; fixed before the night: {len(fixed)} ({len(fixed_done)} complete); named before the night:", 1)
    print(f"rehearsal: sweep exit {rc}, {time.time() - t0:.0f} s wall; plan, store and logs in {d}", file=sys.stderr)
    if rc != 0 or stops or kills < a.kills:
        # CI keeps only this output: what ended the sweep must be in it, not only in sweep.log.
        print(f"rehearsal: the sweep ended by itself {len(stops) + (rc != 0)} times (exit {stops + [rc]}); "
              f"{kills} of {a.kills} kills landed; what it said:", file=sys.stderr)
        said = [l.rstrip() for l in open(os.path.join(d, "sweep.log"), errors="replace")
                if not l.startswith(("note:", "warning: no GPU", "store "))
                and not any(w in l for w in ("skipped(preflight", "fixed before the night", "daemon pid"))]
        for l in said[-25:]:
            print(f"  sweep.log: {l[:400]}", file=sys.stderr)
    for c in failed:
        print(f"  failed during the night: {c[:12]} ({eras.get(next((k for k in eras if k.startswith(c)), c), '?')}) {why[c]}", file=sys.stderr)
        for r in by_commit[c]:
            rec = last.get(r["key"]) or {}
            if rec.get("status") != "success":
                print(f"    {r['key']}: {rec.get('status', 'not run')} {rec.get('category') or ''} {(rec.get('error') or '')[:160]}", file=sys.stderr)
    if leave_out:
        def made(how):
            return {r["commit"] for r in last.values()
                    if r["variant"] == "baseline" and how in (r["provenance"].get("other") or {}).get("image_origin", "")}
        overlaid, built = made("derived by overlay"), made("built from source")
        line += f"; baselines derived: {len(overlaid | built)}/{len(leave_out)} ({len(overlaid)} overlay, {len(built)} built from source)"
    dig = subprocess.run([ns, "digest", "--store", store], capture_output=True, text=True).stdout
    idle = re.search(r"idle while runs waited: ([0-9.]+) GPU-minutes \(of ([0-9.]+)", dig)
    if idle:
        line += f"; GPUs idle while runs waited: {idle.group(1)} of {idle.group(2)} GPU-minutes"
    bad = len(complete) + len(named) + len(failed) != len(with_cmd)
    # A night that ends with runnable work never run did not do its job, whatever ended it.
    unrun = [c for c in failed if why[c] == "not run"]
    if unrun or rc not in (0, 3):
        print(f"rehearsal: the sweep ended with exit {rc} and {len(unrun)} commits never run", file=sys.stderr)
        bad = True
    missed = [c for c in failed if why[c] in KNOWABLE]
    if missed:
        print(f"rehearsal: preflight missed {len(missed)} knowable failures: {', '.join(c[:12] + ' ' + why[c] for c in missed)}", file=sys.stderr)
        bad = True
    if a.kills:
        orphans = containers_of(plan_name(plan))
        recs = subprocess.run([ns, "results", "--store", store, "--format", "jsonl"], check=True,
                              capture_output=True, text=True).stdout.splitlines()
        attempts = collections.Counter((r["key"], r["attempt"]) for r in map(json.loads, filter(str.strip, recs)))
        duplicated = sum(1 for n in attempts.values() if n > 1)
        lost = sum(1 for r in runs if not r["skip_reason"] and last.get(r["key"], {}).get("status") not in ("success", "failed", "skipped"))
        line += f"; kill -9 x{kills}: {orphans} orphan containers, {lost} runs lost, {duplicated} attempts duplicated"
        bad = bad or orphans > 0 or lost > 0 or duplicated > 0
    print(line)
    if a.check and bad:
        sys.exit(1)


if __name__ == "__main__":
    main()

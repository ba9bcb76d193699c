"""The rehearsal's world, as strict as a real box: a vLLM clone whose release tags place
every commit in its era, an HF cache and a stand-in Hub holding the seed models with their
real sizes and architectures (models.json; a model not listed answers 404), and the agent
patches as an operator's box has them (some absent, some that no longer apply)."""

import http.server
import json
import os
import random
import re
import subprocess
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOG = json.load(open(os.path.join(HERE, "models.json")))
# Release tags of the fixture clone, in order (the eras the seeds span and around them).
TAGS = ["0.3.0", "0.3.3", "0.4.0", "0.4.2", "0.4.3", "0.5.0", "0.5.3", "0.5.3.post1", "0.5.4",
        "0.5.5", "0.6.0", "0.6.1", "0.6.2", "0.6.3", "0.6.3.post1", "0.6.4", "0.6.4.post1",
        "0.6.5", "0.6.6", "0.6.6.post1", "0.7.0", "0.7.1", "0.7.2", "0.7.3", "0.8.0", "0.8.1",
        "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.8.5.post1", "0.9.0", "0.9.1", "0.9.2", "0.10.0",
        "0.10.1", "0.10.1.1"]
# Eras a commit with no known version is placed in: ISO-Bench's commits span these.
UNKNOWN_ERAS = TAGS[TAGS.index("0.4.0"):]
ALWAYS = ["LlamaForCausalLM", "MistralForCausalLM", "OPTForCausalLM", "GemmaForCausalLM",
          "PhiForCausalLM", "NemotronForCausalLM"]
TOKEN = "hf_rehearsalTOKENnotASecret0123456789"


def vkey(v):
    """A PEP 440 sort key, enough for vLLM's versions (dev < rc < release < post)."""
    m = re.match(r"v?(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?", v)
    if not m:
        return ((0,), (0, 0), -1, float("inf"))
    rel = tuple(int(x) for x in m.group(1).split("."))
    rel = rel + (0,) * (4 - len(rel))
    pre, post, dev = m.group(2), m.group(4), m.group(5)
    if pre:
        pre_k = ({"a": -3, "b": -2, "rc": -1}[pre], int(m.group(3)))
    elif dev is not None and post is None:
        pre_k = (-4, 0)
    else:
        pre_k = (0, 0)
    return (rel, pre_k, int(post) if post is not None else -1, int(dev) if dev is not None else float("inf"))


def era_of(version, commit):
    """The release tag a commit sits after: the newest tag not after its version; a
    commit with no known version gets a seeded era among those ISO-Bench spans."""
    if version and not version.startswith("0.0.0"):
        k = vkey(version)
        fits = [t for t in TAGS if vkey(t) <= k]
        if fits:
            return fits[-1]
    return random.Random(commit).choice(UNKNOWN_ERAS)


def git(clone, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="rehearsal", GIT_AUTHOR_EMAIL="r@r",
               GIT_COMMITTER_NAME="rehearsal", GIT_COMMITTER_EMAIL="r@r",
               GIT_AUTHOR_DATE="2025-01-01T00:00:00", GIT_COMMITTER_DATE="2025-01-01T00:00:00")
    return subprocess.run(["git", "-C", clone, *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def registry_text(tag):
    archs = ALWAYS + [a for a, first in CATALOG["architectures"].items() if vkey(first) <= vkey(tag)]
    lines = "".join(f'    "{a}": ("{a.lower()}", "{a}"),\n' for a in sorted(archs))
    return f"_MODELS = {{\n{lines}}}\n"


def build_clone(clone, entries):
    """`entries`: dicts with key, tag, kernel. Main history: one commit per release tag
    (its model registry, version.py, the files patches touch). Each entry: a parent and a
    commit on a branch from its era's tag. Returns key → (commit, parent)."""
    subprocess.run(["rm", "-rf", clone], check=True)
    os.makedirs(clone)
    git(clone, "init", "-q")
    for t in TAGS:
        write(os.path.join(clone, "vllm/model_executor/models/registry.py"), registry_text(t))
        write(os.path.join(clone, "vllm/version.py"), f'__version__ = "{t}"\n')
        write(os.path.join(clone, "vllm/worker/model_runner.py"), "# model_runner\n")
        write(os.path.join(clone, "vllm/__init__.py"), "")
        write(os.path.join(clone, "setup.py"), "from setuptools import setup\nsetup()\n")
        # benchmarks/ as vLLM's tree has it at the release: the runtime takes the scripts
        # from the clone at each variant's commit (the stand-in reads the era off line 1).
        for b in ("serving", "throughput", "latency", "prefix_caching"):
            write(os.path.join(clone, "benchmarks", f"benchmark_{b}.py"),
                  f"# vllm-standin script for vLLM {t}\n# benchmark_{b}.py of vLLM {t} (stand-in)\n")
        write(os.path.join(clone, "benchmarks", "backend_request_func.py"),
              f"# vllm-standin script for vLLM {t}\n# request functions of the serving benchmark\n")
        write(os.path.join(clone, "benchmarks", "sonnet.txt"),
              "When night comes down and every lamp is lit,\nThe queue of work begins its patient climb;\n" * 7)
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", f"release {t}")
        git(clone, "tag", f"v{t}")
    out = {}
    for e in entries:
        key = e["key"]
        git(clone, "checkout", "-q", "--detach", f"v{e['tag']}")
        write(os.path.join(clone, "vllm", "fixture", f"p_{key}.py"), "P = 1\n")
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", f"parent of {key}")
        parent = git(clone, "rev-parse", "HEAD")
        write(os.path.join(clone, "vllm", "fixture", f"c_{key}.py"), "C = 1\n")
        if e.get("kernel"):
            write(os.path.join(clone, "csrc", f"k_{key}.cu"), "// a kernel: this baseline needs a build\n")
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", key)
        out[key] = (git(clone, "rev-parse", "HEAD"), parent)
    git(clone, "checkout", "-q", "--detach", f"v{TAGS[-1]}")
    return out


def files_of(model):
    m = CATALOG["models"][model]
    cfg = {"architectures": [m["arch"]], "torch_dtype": m.get("dtype", "bfloat16"),
           "model_type": m["arch"].lower()}
    if m.get("rope"):
        cfg["rope_scaling"] = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192, "rope_type": m["rope"]}
    if m.get("quantization"):
        cfg["quantization_config"] = {"quant_method": m["quantization"]}
    index = {"metadata": {"total_size": m["bytes"]},
             "weight_map": {"model.embed_tokens.weight": "model-00001-of-00001.safetensors"}}
    return {"config.json": json.dumps(cfg), "model.safetensors.index.json": json.dumps(index)}


def hf_cache(hub):
    """config.json and the safetensors index of every catalog model (no weights: the
    stand-in needs none), and the stand-in's catalog (GPU memory, architectures by era)."""
    sha = "0" * 40
    for model in CATALOG["models"]:
        repo = os.path.join(hub, "models--" + model.replace("/", "--"))
        write(os.path.join(repo, "refs", "main"), sha)
        for name, text in files_of(model).items():
            write(os.path.join(repo, "snapshots", sha, name), text)
    write(os.path.join(hub, ".standin-catalog.json"),
          json.dumps({"gpu_gib": CATALOG["gpu_gib"], "architectures": CATALOG["architectures"]}))


class _Hub(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, status, body, ctype="application/json", extra=()):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0]
        models = CATALOG["models"]
        authed = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        if path.startswith("/api/models/"):
            mid = path[len("/api/models/"):]
            if mid not in models:
                return self.reply(404, '{"error":"Repository not found"}', extra=[("X-Error-Code", "RepoNotFound")])
            m = models[mid]
            sib = [{"rfilename": n, "size": len(t)} for n, t in files_of(mid).items()]
            sib.append({"rfilename": "model-00001-of-00001.safetensors", "size": m["bytes"]})
            return self.reply(200, json.dumps({"id": mid, "sha": "0" * 40, "gated": "manual" if m.get("gated") else False, "siblings": sib}))
        if path.startswith("/api/resolve-cache/models/"):
            # Where the real Hub's 307 for a small file leads: <org>/<name>/<commit>/<file>.
            parts = path[len("/api/resolve-cache/models/"):].split("/", 3)
            files = files_of("/".join(parts[:2])) if len(parts) == 4 and "/".join(parts[:2]) in models else {}
            if len(parts) == 4 and parts[3] in files:
                return self.reply(200, files[parts[3]])
            return self.reply(404, "Entry not found", "text/plain")
        if "/resolve/" in path:
            mid, rest = path.lstrip("/").split("/resolve/", 1)
            name = rest.split("/", 1)[-1]
            if mid not in models:
                return self.reply(401, "Repository not found", "text/plain", [("X-Error-Code", "RepoNotFound")])
            if models[mid].get("gated") and not authed:
                return self.reply(403, f"Access to model {mid} is restricted.", "text/plain", [("X-Error-Code", "GatedRepo")])
            files = files_of(mid)
            if name in files:
                # As huggingface.co answers (seen 2026): a 307 to a path of its own.
                return self.reply(307, "", "text/plain", [("Location", f"/api/resolve-cache/models/{mid}/{'0' * 40}/{name}"),
                                                          ("X-Repo-Commit", "0" * 40)])
            return self.reply(404, "Entry not found", "text/plain", [("X-Error-Code", "EntryNotFound")])
        return self.reply(404, "no route", "text/plain")


def start_hub():
    """The stand-in Hub on 127.0.0.1 (a thread); returns its URL."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}"


def patch_mode(index):
    """How an agent's patch is on the box: every 7th commit's was never copied, every 5th
    no longer applies to the parent; the rest apply."""
    if index % 7 == 3:
        return "missing"
    if index % 5 == 2:
        return "stale"
    return "ok"


def agent_patch(d, commit8, mode):
    """The agent's patch where the plan says (`runs/claude_code/{commit8}/model_patch.diff`)."""
    p = os.path.join(d, "runs", "claude_code", commit8, "model_patch.diff")
    if mode == "missing":
        if os.path.exists(p):
            os.remove(p)
        return
    context = "# model_runner" if mode == "ok" else "# model_runner (as the agent last saw it)"
    write(p, "--- a/vllm/worker/model_runner.py\n"
             "+++ b/vllm/worker/model_runner.py\n"
             "@@ -1 +1,2 @@\n"
             f" {context}\n"
             f"+# tuned by claude_code for {commit8}\n")

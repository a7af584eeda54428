#!/usr/bin/env python3
"""Watch an operator's executors and measure stage-to-stage latency.

Usage:
  stages.py watch RUN_DIR APISERVER_PORT NAMESPACE MODE OUT_TSV   (until killed)
  stages.py stats OUT_TSV APPLY_EPOCH_S

MODE "job" (NodeWright): a stage is created when its Job appears, and done when its pod turns
Succeeded. MODE "pod" (the Go operator's bare pods): a stage is created when its pod appears, and
done when every init container has terminated with exit code 0 (what that operator waits for).
The watch writes one line per observation: epoch seconds (taken when the event arrives), created|done,
node, object name. `stats` follows each package on each node (the executor names of both operators
start with <nodewright>-<package>-<version>-<stage>-): every creation of a stage is paired with the
completion of the same package's previous stage on that node, and the latencies of those pairs
(p50, p99, max) are printed with the time from APPLY_EPOCH_S to the first creation; for Jobs also
the part after the Job turned Complete (the operator's share) and the part from the pod's success
to the Job's Complete condition (the Job controller's share).
"""
import json
import re
import ssl
import sys
import threading
import time
import http.client

NODE_LABEL = "nodewright.nvidia.com/node"
STAGE = re.compile(r"^(.*?)-(apply|config|interrupt|post-interrupt|uninstall|upgrade)-")


def connect(run, port):
    ctx = ssl.create_default_context(cafile=f"{run}/pki/ca.crt")
    ctx.load_cert_chain(f"{run}/pki/admin.crt", f"{run}/pki/admin.key")
    return http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=600)


def watch(run, port, path, on_event):
    """List, then watch PATH from the list's resourceVersion; reconnect on end or error."""
    rv = None
    while True:
        try:
            conn = connect(run, port)
            if rv is None:
                conn.request("GET", path)
                body = json.loads(conn.getresponse().read())
                rv = body["metadata"]["resourceVersion"]
                for obj in body.get("items") or []:
                    on_event("ADDED", obj)
            conn.request("GET", f"{path}?watch=1&resourceVersion={rv}&timeoutSeconds=1800")
            resp = conn.getresponse()
            while True:
                line = resp.readline()
                if not line:
                    break
                ev = json.loads(line)
                if ev.get("type") == "ERROR":
                    rv = None
                    break
                obj = ev.get("object") or {}
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                on_event(ev.get("type"), obj)
        except (OSError, ValueError, http.client.HTTPException) as err:
            print(f"stages.py: watch {path}: {err}", file=sys.stderr)
            time.sleep(1)


def run_watch(run, port, ns, mode, out_path):
    out = open(out_path, "a", buffering=1, encoding="utf-8")
    lock = threading.Lock()
    seen_created, seen_done = set(), set()

    def emit(what, node, name):
        with lock:
            out.write(f"{time.time():.3f}\t{what}\t{node}\t{name}\n")

    def on_pod(kind, obj):
        meta, spec, st = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        uid, node = meta.get("uid"), spec.get("nodeName") or (meta.get("labels") or {}).get(NODE_LABEL, "-")
        if kind == "DELETED":
            return
        if mode == "pod" and uid not in seen_created:
            seen_created.add(uid)
            emit("created", node, meta.get("name"))
        if uid in seen_done:
            return
        if mode == "job":
            done = st.get("phase") == "Succeeded"
        else:
            inits = st.get("initContainerStatuses") or []
            done = bool(inits) and all(
                ((s.get("state") or {}).get("terminated") or {}).get("exitCode", 1) == 0 for s in inits)
        if done:
            seen_done.add(uid)
            emit("done", node, meta.get("name"))

    def on_job(kind, obj):
        meta = obj.get("metadata") or {}
        uid, node = meta.get("uid"), (meta.get("labels") or {}).get(NODE_LABEL, "-")
        if kind == "DELETED":
            return
        if uid not in seen_created:
            seen_created.add(uid)
            emit("created", node, meta.get("name"))
        conds = (obj.get("status") or {}).get("conditions") or []
        if uid not in seen_done and any(c.get("type") == "Complete" and c.get("status") == "True" for c in conds):
            seen_done.add(uid)
            emit("job_complete", node, meta.get("name"))

    threads = [threading.Thread(target=watch, args=(run, port, f"/api/v1/namespaces/{ns}/pods", on_pod), daemon=True)]
    if mode == "job":
        threads.append(threading.Thread(target=watch, args=(run, port, f"/apis/batch/v1/namespaces/{ns}/jobs", on_job), daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def stats(path, apply_s):
    chains = {}
    first = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            t, what, node, name = line.rstrip("\n").split("\t")
            t = float(t)
            m = STAGE.match(name)
            chains.setdefault((node, m.group(1) if m else name), []).append((t, what))
            if what == "created" and t >= apply_s and (first is None or t < first):
                first = t
    lat, via_job, job_ctl = [], [], []
    for evs in chains.values():
        evs.sort()
        last_done = last_job = None
        for t, what in evs:
            if what == "done":
                last_done = t
            elif what == "job_complete":
                last_job = t
                if last_done is not None:
                    job_ctl.append(t - last_done)
            elif last_done is not None:
                lat.append(t - last_done)
                if last_job is not None:
                    via_job.append(t - last_job)
                last_done = last_job = None
    first_s = "-" if first is None else f"{first - apply_s:.2f}"
    line = (f"first_create_s={first_s} stage_pairs={len(lat)} stage_p50_s={pct(lat, 50):.2f} "
            f"stage_p99_s={pct(lat, 99):.2f} stage_max_s={max(lat) if lat else float('nan'):.2f}")
    if via_job:
        # the part after the Job controller marked the Job Complete (the operator's own share)
        line += f" job_complete_to_next_p50_s={pct(via_job, 50):.2f} job_complete_to_next_p99_s={pct(via_job, 99):.2f}"
    if job_ctl:
        # the Job controller's share: the pod's success to the Job's Complete condition
        line += f" pod_done_to_job_complete_p50_s={pct(job_ctl, 50):.2f} pod_done_to_job_complete_p99_s={pct(job_ctl, 99):.2f}"
    print(line)

if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "watch":
        run_watch(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
    elif len(sys.argv) == 4 and sys.argv[1] == "stats":
        stats(sys.argv[2], float(sys.argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)

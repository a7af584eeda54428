#!/usr/bin/env python3
"""Count apiserver requests from JSON audit logs by user agent, verb and resource.

The apiserver rotates its audit log at 100 MB (audit-<time>.log); pass every file.

Usage: audit.py AUDIT_LOG... [--since EPOCH_S] [--until EPOCH_S] [--agent SUBSTRING]
Prints one TSV row per (agent, verb, resource) with its count, then the totals per agent.
The user agent is cut at its first "/" (e.g. "kube-controller-manager/v1.35.8 ..." becomes
"kube-controller-manager"); a watch is counted once, when it is opened.
"""
import argparse
import collections
import json
from datetime import datetime


def epoch(ts):
    """RFC 3339 (micro-second) timestamp of the audit log to epoch seconds."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--since", type=float, default=0.0)
    ap.add_argument("--until", type=float, default=float("inf"))
    ap.add_argument("--agent", default="")
    a = ap.parse_args()
    by_key = collections.Counter()
    by_agent = collections.Counter()
    for path in a.logs:
        count(path, a, by_key, by_agent)
    report(by_key, by_agent)


def count(path, a, by_key, by_agent):
    """Adds the records of one audit log file to the counters."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("stage") not in ("ResponseComplete", "Panic"):
                # long-running requests (watches) are logged at ResponseStarted; count them once
                if ev.get("stage") != "ResponseStarted":
                    continue
            elif ev.get("verb") == "watch":
                continue
            t = epoch(ev.get("requestReceivedTimestamp") or ev.get("stageTimestamp"))
            if not a.since <= t <= a.until:
                continue
            agent = (ev.get("userAgent") or "-").split("/")[0]
            if a.agent and a.agent not in agent:
                continue
            ref = ev.get("objectRef") or {}
            res = ref.get("resource", ev.get("requestURI", "-").split("?")[0])
            if ref.get("subresource"):
                res += "/" + ref["subresource"]
            by_key[(agent, ev.get("verb", "-"), res)] += 1
            by_agent[agent] += 1


def report(by_key, by_agent):
    """Prints the per-(agent, verb, resource) rows, then the totals per agent."""
    print("agent\tverb\tresource\tcount")
    for (agent, verb, res), n in sorted(by_key.items(), key=lambda kv: (kv[0][0], -kv[1])):
        print(f"{agent}\t{verb}\t{res}\t{n}")
    print("agent\ttotal")
    for agent, n in by_agent.most_common():
        print(f"{agent}\t{n}")


if __name__ == "__main__":
    main()

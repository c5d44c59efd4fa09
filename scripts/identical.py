#!/usr/bin/env python3
"""Byte-identity check for refactors: md5 of the JSON result of a fixed matrix of runs.

Every scenario on its default machine with every kernel preset it accepts, the seed
experiments' variants on their machines (quick sets), a trace window, and
`ipisim reproduce --quick --json`. A refactor must leave every line unchanged:

    python3 scripts/identical.py > /tmp/before.md5   # on the old commit
    python3 scripts/identical.py | diff /tmp/before.md5 -   # on the new one

A change that only adds parameters adds their keys to every result's `config`; `--drop KEY,...`
hashes each result without those keys, so both sides can be compared on everything else.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import ipisim

# Small enough that the matrix runs in a minute or two, big enough that reclaim and OOM happen.
SMALL = {
    "vm-scalability/lru-file-mmap-read": {"scale": "0.01"},
    "swapout": {"scale": "0.01"},
    "hackbench": {"groups": "20"},
    "qemu-guest-ram-unplug": {"guest_ram": "16G"},
    "migrate": {"scale": "0.05"},
}


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def one(job: tuple[str, str, str, tuple[tuple[str, str], ...], tuple[str, ...]]) -> str:
    name, scenario, machine, sets, drop = job[0], job[1], job[2], dict(job[3]), job[4]
    kernel = sets.pop("@kernel")
    try:
        r = ipisim.run(scenario, machine=machine, kernel=kernel, sets=sets)
    except ipisim.ConfigError as e:
        return f"{name}\terror\t{md5(str(e))}"
    text = r.to_json()
    if drop:
        j = json.loads(text)
        for k in drop:
            j["config"].pop(k, None)
        text = json.dumps(j, sort_keys=True)
    return f"{name}\t{md5(text)}"


def jobs(drop: tuple[str, ...]) -> list[tuple[str, str, str, tuple[tuple[str, str], ...], tuple[str, ...]]]:
    out = []
    b = ipisim.list_builtins()
    kernels = [k["name"] for k in b["kernels"]]
    for sc in b["scenarios"]:
        scen = sc["name"]
        d = ipisim.describe(scen)
        machine = str(d.get("machine") or "host-2cpu")
        for k in kernels:
            sets = {**SMALL.get(scen, {}), "@kernel": k}
            out.append((f"{scen} {machine} {k}", scen, machine, tuple(sorted(sets.items())), drop))
    data = json.loads((Path(ipisim.__file__).parent / "data" / "published.json").read_text())
    for e in data["experiments"]:
        machine = e.get("machine_profile") or e.get("profile") or ""
        for v in e["variants"]:
            sets = {**v["sets"], **e.get("quick_sets", {}), "@kernel": v["kernel"]}
            job = (f"{e['id']} {v['label']}", e["scenario"], machine, tuple(sorted(sets.items())), drop)
            out.append(job)
    return out


def main() -> None:
    drop: tuple[str, ...] = ()
    if len(sys.argv) == 3 and sys.argv[1] == "--drop":
        drop = tuple(sys.argv[2].split(","))
    elif len(sys.argv) != 1:
        sys.exit("usage: identical.py [--drop KEY,...]")
    js = jobs(drop)
    with ProcessPoolExecutor(2) as pool:
        for line in pool.map(one, js):
            print(line, flush=True)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            ["ipisim", "reproduce", "--quick", "--json", f"{d}/q.json", "--out", d],
            check=True,
            capture_output=True,
        )
        print(f"reproduce --quick\t{md5(Path(d, 'q.json').read_text())}")
        t = subprocess.run(
            ["ipisim", "run", "shootdown", "--trace", f"{d}/t", "--trace-window", "0:0.001"],
            capture_output=True,
            text=True,
        )
        traces = "".join(p.read_text() for p in sorted(Path(d).glob("t*")))
        print(f"shootdown trace\t{t.returncode}\t{md5(t.stdout + traces)}")


if __name__ == "__main__":
    sys.exit(main())

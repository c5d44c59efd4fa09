"""`ipisim validate --qemu`: the guest's plumbing, and one 4-vCPU boot checking the shootdown grid.

The boot is skipped where qemu-system-x86_64, a kernel image in /boot or busybox-static is missing
(.ci/run installs them where it can).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from ipisim import qemu
from ipisim.cli import main

UNAVAILABLE = qemu.unavailable_reason()


def test_cpio_is_newc_with_a_trailer() -> None:
    data = qemu.cpio([("init", 0o100755, b"#!/bin/sh\n")], devices=[("dev/console", 0o020600, 5, 1)])
    assert data.startswith(b"070701") and b"TRAILER!!!" in data
    assert len(data) % 4 == 0 and b"init\0" in data and b"dev/console\0" in data


def test_kernel_version_and_preset(tmp_path: Path) -> None:
    image = bytearray(0x1000)
    image[0x202:0x206] = b"HdrS"
    image[0x20E:0x210] = (0x400 - 0x200).to_bytes(2, "little")
    image[0x400:0x420] = b"6.1.0-56-amd64 (debian) #1 SMP\0"
    (tmp_path / "bzImage").write_bytes(bytes(image))
    version = qemu.kernel_version(tmp_path / "bzImage")
    assert version.startswith("6.1.0-56-amd64")
    assert qemu.preset_for(version) == "linux-6.1"
    assert qemu.preset_for("6.2.16") == "linux-6.1"
    assert qemu.preset_for("6.12.0") == "linux-6.4"  # not linux-6.5-arm64: the guest is x86_64
    assert qemu.preset_for("6.16.1") == "linux-6.15"
    assert qemu.preset_for("6.18.44-fc") == "linux-6.18"
    (tmp_path / "vmlinux").write_bytes(b"\x7fELF" + bytes(100))
    assert qemu.kernel_version(tmp_path / "vmlinux") == ""


def test_guest_output_is_parsed_per_job() -> None:
    text = "\r\n".join(
        [
            "@start 4 6.1.0-56-amd64 1.25",
            "@irq0 TLB: 1 2 3 4 TLB shootdowns",
            "@begin 0",
            "@vm0 pgscan_kswapd 10",
            "syscalls=512 ns=1000 cpu_ns=900 tlb=0,512,0,0 cal=0,512,1,0",
            "syscalls=512 ns=1000 cpu_ns=900 tlb=0,511,0,0 cal=0,511,0,0",
            "@vm1 pgscan_kswapd 15",
            "@end 0 0",
            "@begin 1",
            "membarrier: oops",
            "syscalls=1000 ns=",
            "@end 1 1",
            "@irq1 TLB: 1 514 3 5 TLB shootdowns",
            "@done 9.5",
        ]
    )
    out = qemu.parse_output(text)
    assert out.finished and out.cpus == 4 and out.boot_s == 1.25 and out.done_s == 9.5
    assert [sum(s.tlb) for s in out.samples[0]] == [512, 511]
    assert out.vmstat[0] == {"pgscan_kswapd": 5} and out.rc == {0: 0, 1: 1}
    assert out.messages[1] == ["membarrier: oops", "syscalls=1000 ns="] and out.irq["TLB"] == [0, 512, 0, 1]


def test_jobs_cover_the_grid_with_one_and_n_minus_1_remote_threads() -> None:
    jobs = qemu.jobs(8)
    shoot = [j for j in jobs if j.program == "shootdown"]
    assert len(shoot) == 3 * 4 * 5  # op x batch x (busy, sleeping) x (1, 7) + none
    assert any(j.label == "shootdown munmap b=34 busy x7" for j in shoot)
    assert {j.label for j in jobs if j.program == "membarrier"} >= {"membarrier busy x7", "membarrier none"}
    assert "job 0 /bin/shootdown --op madvise --batch 1 --remote busy" in qemu.jobs_script(jobs)
    assert len(qemu.jobs(2)) == 3 * 4 * 3 + 3 + 6


def test_reclaim_and_migrate_jobs_compare_counts_and_vmstat_within_5_percent() -> None:
    todo = qemu.jobs(8, 3, ["lru_file_mmap_read", "migrate"], memory_mib=512, nodes=2)
    lru, mig = todo
    assert lru.label == "lru-file-mmap-read x8" and lru.counters == ("TLB", "CAL", "pgscan", "pgsteal")
    assert f"--bytes {10 * 512 * 2**20 // 8}" in " ".join(lru.args) and lru.tolerance == 0.05
    assert mig.counters == ("TLB", "CAL", "pgmigrate") and ("threads", 7) in mig.sets
    script = qemu.jobs_script(todo)
    assert script.startswith("mntfs ") and "job 0 /bin/lru_file_mmap_read --dir /mnt" in script
    with pytest.raises(ValueError, match="migrate needs --nodes 2"):
        qemu.jobs(4, 1, ["migrate"])
    # costs.c (examples/tcg_costs.py) pages out sparse files in /var/tmp: ext4 there, not rootfs.
    costs = qemu.Job("costs", "TLB", "costs", ("--local-only",), "swap-bench", ())
    assert qemu.jobs_script([costs]).startswith("mntfs ") and "ln -sfn /mnt /var/tmp" in qemu.INIT
    sample = qemu.hw.parse_sample("syscalls=8 ns=1 tlb=10,20 cal=5,5")
    vm = {"pgscan_kswapd": 300, "pgscan_direct": 100, "pgsteal_direct": 200}
    rows = [qemu.Row(lru, [sample, sample], sim, vm, c) for c, sim in [("TLB", 31), ("pgscan", 200)]]
    assert [(r.row, r.real_count, r.ok) for r in rows] == [("TLB", 30, True), ("pgscan", 200, True)]
    assert not qemu.Row(lru, [sample], 32, vm, "TLB").ok  # 32 against 30: over 5 %
    assert "pgscan" in qemu.format_rows(rows)


def test_reclaim_jobs_reclaim_a_cgroup_in_turn_with_swap_only_for_anon() -> None:
    todo = qemu.jobs(4, 2, ["reclaim"], memory_mib=512)
    assert [j.label for j in todo] == [
        "reclaim file busy x1",
        "reclaim file busy x3",
        "reclaim file sleeping x3",
        "reclaim file busy x3 kswapd",
        "reclaim anon busy x3",
    ]
    assert ("reclaimer", "kswapd") in todo[3].sets and "kswapd" in todo[3].args
    anon = todo[4]
    assert ("touch", "in_turn") in anon.sets and ("access", "write") in anon.sets
    assert ("pages", 3 * qemu.SWAP_PAGES // 4 // 3) in anon.sets
    lines = qemu.jobs_script(todo).splitlines()
    assert [ln.split()[0] for ln in lines] == ["mntfs", "memcg", "job", "job", "job", "job", "swap", "job"]
    # memory.reclaim counts its scans in the cgroup's memory.stat only.
    sample = qemu.hw.parse_sample("syscalls=3 ns=1 tlb=0,10 cal=0,10")
    vm = {"pgscan_direct": 0, "memcg_pgscan_direct": 2000, "memcg_pgscan_kswapd": 7}
    assert qemu.Row(anon, [sample], 2000, vm, "pgscan").real_count == 2000


def test_the_file_programs_take_the_modules_of_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(qemu.Unavailable, match="modules"):
        qemu.modules_cpio("0.0-no-such-release")
    # Any installed Debian release will do (its number moves with Debian's updates).
    releases = sorted(p.parent.name for p in Path("/lib/modules").glob("*/modules.dep"))
    if not releases:
        pytest.skip("no /lib/modules/*/modules.dep")
    release = releases[-1]
    data = qemu.modules_cpio(release)
    order = data[data.index(b"lib/modules/order\0") :]
    lines = order[order.index(b"\0") :].strip(b"\0").split(b"\n")
    names = [ln.split()[0].decode() for ln in lines if ln.strip(b"\0 ")]
    assert names.index("crc16.ko") < names.index("ext4.ko") and names.index("jbd2.ko") < names.index(
        "ext4.ko"
    )
    assert "crc32c_generic.ko" in names and any(ln.startswith(b"brd.ko rd_nr=2") for ln in lines)


def test_qemu_command_has_the_shape(tmp_path: Path) -> None:
    if not qemu.shutil.which("qemu-system-x86_64"):
        pytest.skip("no qemu-system-x86_64")
    g = qemu.Guest(8, 2, 1024)
    cmd = " ".join(qemu.qemu_command(Path("bz"), Path("rd"), g, "tcg", tmp_path / "c", tmp_path / "r"))
    assert "-smp 8" in cmd and "-accel tcg" in cmd and "-m 1024M" in cmd
    assert "node,nodeid=1,cpus=4-7,memdev=mem1" in cmd and "size=512M" in cmd
    assert g.sim_shape() == [
        ("machine.nodes", 2),
        ("machine.cpus_per_node", 4),
        ("machine.mem_per_node", "512MiB"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cpus", "1"], "--cpus: at least 2"),
        (["--cpus", "4", "--nodes", "3"], "--nodes: must divide"),
        (["--memory", "lots"], "expected a size"),
        (["--kernel-image", "/no/such/bzImage"], "no such kernel image"),
        (["--programs", "shootdown,swap_bench"], "--programs: unknown swap_bench"),
        (["--preset", "linux-0.1", "--kernel-image", __file__], "linux-0.1"),
    ],
)
def test_errors_are_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--qemu", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


@pytest.mark.qemu
@pytest.mark.skipif(bool(UNAVAILABLE), reason=UNAVAILABLE)
def test_shootdown_grid_at_4_vcpus_matches_linux_6_1_exactly() -> None:
    """Every shootdown cell (op x batch x busy/sleeping/none, 1 and 3 remote threads): the median
    TLB count of 3 repeats in one boot equals the simulation's, with the preset of the image, but
    for at most 3 cells that lost one or two IPIs. A loaded TCG host now and then takes a
    spinner's vCPU off its mm for a flush (1535 against 1536, twice in 3 repeats once, in a
    clean-clone CI run); a cell with more IPIs than the simulation, or any other difference, fails."""
    image = qemu.default_kernel_image()
    preset = qemu.preset_for(qemu.kernel_version(image))
    guest = qemu.Guest(4, 1, 512)
    todo = qemu.jobs(guest.cpus, repeats=3, programs=["shootdown"])
    t0 = time.monotonic()
    b = qemu.boot(image, guest, todo, timeout_s=600)
    rows = list(qemu.compare(b.output, todo, machine="host-2cpu", kernel=preset, guest=guest))
    print(f"\n{qemu.format_rows(rows)}boot {b.wall_s:.1f} s ({b.accel}), all {time.monotonic() - t0:.1f} s")
    off = [(r.job.label, r.real_count, r.sim) for r in rows if r.real_count != r.sim]
    assert all(sim - 2 <= real < sim for _, real, sim in off), off
    assert len(off) <= 3, off


def test_swap_bench_program_runs_here_and_refuses_bad_usage() -> None:
    """native/swap_bench.c (examples/riscv_guest.py runs it in a riscv guest) on this host."""
    try:
        exe = qemu.hw.build("swap_bench")
    except qemu.hw.Unavailable as e:
        pytest.skip(str(e))
    run = [exe, "--zap", "50", "--sleepers", "1", "--cpu", "-1", "--neighbour", "0"]
    out = subprocess.run(run, capture_output=True, text=True, check=True, timeout=60)
    lines = dict(line.split(maxsplit=1) for line in out.stdout.splitlines())
    assert float(lines["ns_per_call"]) > 0
    assert all(0 <= int(c) < (os.cpu_count() or 1) for c in lines["cpus"].split())
    bad = subprocess.run([exe, "--loops", "1", "--zap", "1"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("usage: swap_bench")


def test_hackbench_program_runs_here_and_refuses_bad_usage() -> None:
    """native/hackbench.c (examples/hackbench_guest.py runs it in a 6.1 guest) on this host."""
    try:
        exe = qemu.hw.build("hackbench")
    except qemu.hw.Unavailable as e:
        pytest.skip(str(e))
    out = subprocess.run([exe, "2", "5"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.startswith("forked 80 ready 80 reaped 80 failed 0 Time: "), out.stdout
    for bad in (["0"], ["x"], ["1", "0"], ["1", "2", "3"]):
        r = subprocess.run([exe, *bad], capture_output=True, text=True, check=False)
        assert r.returncode == 2 and r.stderr.startswith("usage: hackbench"), bad

//! Built-in machine profiles and kernel presets, compiled into the binary so they ship with the
//! package and need no file lookup.

const MACHINES: &[(&str, &str)] = &[
    (
        "host-2cpu",
        include_str!("../../data/machines/host-2cpu.toml"),
    ),
    (
        "xeon-4n-48c-64g",
        include_str!("../../data/machines/xeon-4n-48c-64g.toml"),
    ),
    (
        "xeon-2s-2013",
        include_str!("../../data/machines/xeon-2s-2013.toml"),
    ),
    (
        "power9-128c",
        include_str!("../../data/machines/power9-128c.toml"),
    ),
    (
        "kvm-8cpu",
        include_str!("../../data/machines/kvm-8cpu.toml"),
    ),
    (
        "amd-milan-72c",
        include_str!("../../data/machines/amd-milan-72c.toml"),
    ),
    (
        "kunpeng920-96c",
        include_str!("../../data/machines/kunpeng920-96c.toml"),
    ),
    (
        "snapdragon888",
        include_str!("../../data/machines/snapdragon888.toml"),
    ),
    (
        "hifive-unmatched",
        include_str!("../../data/machines/hifive-unmatched.toml"),
    ),
    ("th1520", include_str!("../../data/machines/th1520.toml")),
    (
        "skylake-2s-104c",
        include_str!("../../data/machines/skylake-2s-104c.toml"),
    ),
    (
        "qemu-virt-riscv",
        include_str!("../../data/machines/qemu-virt-riscv.toml"),
    ),
    // Written by `ipisim calibrate --experiment ID` from the profiles above (published.json).
    (
        "xeon-4n-48c-64g-calibrated",
        include_str!("../../data/machines/xeon-4n-48c-64g-calibrated.toml"),
    ),
    (
        "xeon-2s-2013-calibrated",
        include_str!("../../data/machines/xeon-2s-2013-calibrated.toml"),
    ),
    (
        "power9-128c-calibrated",
        include_str!("../../data/machines/power9-128c-calibrated.toml"),
    ),
    (
        "amd-milan-72c-calibrated",
        include_str!("../../data/machines/amd-milan-72c-calibrated.toml"),
    ),
    (
        "skylake-2s-104c-calibrated",
        include_str!("../../data/machines/skylake-2s-104c-calibrated.toml"),
    ),
    (
        "kunpeng920-96c-calibrated",
        include_str!("../../data/machines/kunpeng920-96c-calibrated.toml"),
    ),
    (
        "snapdragon888-calibrated",
        include_str!("../../data/machines/snapdragon888-calibrated.toml"),
    ),
    (
        "qemu-virt-riscv-calibrated",
        include_str!("../../data/machines/qemu-virt-riscv-calibrated.toml"),
    ),
    (
        "hifive-unmatched-calibrated",
        include_str!("../../data/machines/hifive-unmatched-calibrated.toml"),
    ),
];

const KERNELS: &[(&str, &str)] = &[
    (
        "linux-3.3",
        include_str!("../../data/kernels/linux-3.3.toml"),
    ),
    (
        "linux-3.4",
        include_str!("../../data/kernels/linux-3.4.toml"),
    ),
    (
        "linux-3.8",
        include_str!("../../data/kernels/linux-3.8.toml"),
    ),
    (
        "linux-3.9",
        include_str!("../../data/kernels/linux-3.9.toml"),
    ),
    (
        "linux-4.2",
        include_str!("../../data/kernels/linux-4.2.toml"),
    ),
    (
        "linux-4.3",
        include_str!("../../data/kernels/linux-4.3.toml"),
    ),
    (
        "linux-5.7",
        include_str!("../../data/kernels/linux-5.7.toml"),
    ),
    (
        "linux-5.8",
        include_str!("../../data/kernels/linux-5.8.toml"),
    ),
    (
        "linux-6.1",
        include_str!("../../data/kernels/linux-6.1.toml"),
    ),
    (
        "linux-6.3",
        include_str!("../../data/kernels/linux-6.3.toml"),
    ),
    (
        "linux-6.4",
        include_str!("../../data/kernels/linux-6.4.toml"),
    ),
    (
        "linux-6.14",
        include_str!("../../data/kernels/linux-6.14.toml"),
    ),
    (
        "linux-6.15",
        include_str!("../../data/kernels/linux-6.15.toml"),
    ),
    (
        "linux-6.4-arm64",
        include_str!("../../data/kernels/linux-6.4-arm64.toml"),
    ),
    (
        "linux-6.5-arm64",
        include_str!("../../data/kernels/linux-6.5-arm64.toml"),
    ),
    (
        "linux-6.7-riscv",
        include_str!("../../data/kernels/linux-6.7-riscv.toml"),
    ),
    (
        "linux-6.8-riscv",
        include_str!("../../data/kernels/linux-6.8-riscv.toml"),
    ),
    (
        "linux-6.12-riscv",
        include_str!("../../data/kernels/linux-6.12-riscv.toml"),
    ),
    (
        "linux-6.18",
        include_str!("../../data/kernels/linux-6.18.toml"),
    ),
];

pub fn builtin_machine(name: &str) -> Option<&'static str> {
    MACHINES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn builtin_kernel(name: &str) -> Option<&'static str> {
    KERNELS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn machine_names() -> Vec<&'static str> {
    MACHINES.iter().map(|(n, _)| *n).collect()
}

pub fn kernel_names() -> Vec<&'static str> {
    KERNELS.iter().map(|(n, _)| *n).collect()
}

//! The faults a run injects at fixed points of its fault phase: the vocabulary of the plans
//! of `faults.rs` (the runs with every fault) and `scenarios.rs` (one fault at a time).

/// A fault at a fixed point of the run, as a fraction of the fault phase.
#[derive(Clone, Copy, Debug)]
pub(super) enum Planned {
    TermWorker,
    KillRedis,
    FreezeRedis,
    KillServer,
    HalfOpen,
    /// Cluster: kill a master, let its replica take over, restart it.
    KillMaster,
    /// Cluster: the same, with the replica frozen first so that it lags behind.
    StallAndKillMaster,
    /// The queue's data format upgraded (`upgrade.rs`).
    UpgradeFormat,
    /// The network to Redis made slow and lossy, and fast again (`scenarios.rs`).
    SlowNetwork,
    FastNetwork,
    /// The processes' clocks stepped to this many seconds from the true time.
    StepClock(i64),
    /// Redis's `maxmemory` set to what it uses, and lifted.
    FillMemory,
    FreeMemory,
    /// The AOF's disk filled (with this fsync policy set first), and freed.
    FillDisk {
        fsync_always: bool,
    },
    FreeDisk,
    /// The scenario's host cut off (`netns.rs`), and joined again.
    Partition,
    Heal,
    /// Redis killed and started again, and its clients counted back in.
    RestartStorm,
    /// Every handler fails from now on, and recovers.
    StormOn,
    StormOff,
    /// A flood of high-priority messages from one more producer.
    Flood,
}

public import Logging
public import TGEventLoop

extension TokenGateApp {
    /// How many event loops the public server runs: `server.threads` when set, else one per CPU
    /// the process may use (`cpus.count`: its affinity mask, its cgroup's CPU quota, the CPUs
    /// online; docs/operations.md, "Event loops").
    static func eventLoopCount(_ configuration: TokenGateConfiguration, cpus: UsableCPUs) -> Int {
        configuration.server.threads ?? cpus.count
    }

    /// Logs, once at start, how many event loops `serve` runs and why: one line, `event loops`,
    /// with `loops`, `loops_from` (`server.threads` or `cpus`), and what limits the CPUs:
    /// `cpu_affinity`, `cpu_quota` (CPUs, or `none`), `cpus_online`, `cpus_usable`.
    public static func logEventLoops(_ configuration: TokenGateConfiguration, logger: Logger, cpus: UsableCPUs = .current()) {
        logger.info(
            "event loops",
            metadata: [
                "loops": .stringConvertible(eventLoopCount(configuration, cpus: cpus)),
                "loops_from": .string(configuration.server.threads == nil ? "cpus" : "server.threads"),
                "cpu_affinity": cpus.affinity.map { .stringConvertible($0) } ?? .string("unknown"),
                "cpu_quota": cpus.quota.map { .stringConvertible($0) } ?? .string("none"),
                "cpus_online": .stringConvertible(cpus.online),
                "cpus_usable": .stringConvertible(cpus.count),
            ]
        )
    }
}

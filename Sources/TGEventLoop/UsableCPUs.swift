import CEpoll

#if canImport(Glibc)
import Glibc
#endif

/// The CPUs this process may use, and what limits them: the fewest of the CPUs in its affinity
/// mask (`taskset`, a cpuset), its cgroup v2 CPU quota (`cpu.max` of its cgroup and of every
/// parent, the smallest, rounded up to whole CPUs) and the CPUs online. A container limited to
/// 1.5 CPUs on a 64-core node counts 2; a process under `taskset -c 0` counts 1. The default
/// number of event loops (``EventLoopGroup/defaultCount``, docs/operations.md, "Event loops").
public struct UsableCPUs: Sendable, Equatable, CustomStringConvertible {
    /// The CPUs in the process's affinity mask; nil when the system did not say.
    public let affinity: Int?
    /// The smallest cgroup v2 quota of the process's cgroup and its parents, in CPUs (`1.5` for
    /// `cpu.max` `150000 100000`); nil when none limits it (`max`, cgroup v1, no cgroup at all).
    public let quota: Double?
    /// The CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`).
    public let online: Int

    public init(affinity: Int?, quota: Double?, online: Int) {
        self.affinity = affinity
        self.quota = quota
        self.online = online
    }

    /// How many CPUs the process may keep busy at once: the fewest of the three, at least 1.
    public var count: Int {
        var count = max(1, online)
        if let affinity, affinity > 0 { count = min(count, affinity) }
        // Compared before it becomes an integer: a huge quota would not fit in one.
        if let quota, quota < Double(count) { count = max(1, Int(quota.rounded(.up))) }
        return count
    }

    public var description: String {
        "\(count) (affinity \(affinity.map(String.init) ?? "unknown"), cgroup quota \(quota.map { "\($0)" } ?? "none"), online \(online))"
    }

    /// This process's, read now. `cgroupRoot` is where the cgroup v2 hierarchy is mounted,
    /// `cgroupFile` the file naming the process's cgroup in it (its `0::/path` line); tests give
    /// their own.
    public static func current(cgroupRoot: String = "/sys/fs/cgroup", cgroupFile: String = "/proc/self/cgroup") -> UsableCPUs {
        let affinity = Int(CEpoll_affinity_cpu_count())
        return UsableCPUs(
            affinity: affinity > 0 ? affinity : nil,
            quota: cgroupQuota(cgroupRoot: cgroupRoot, cgroupFile: cgroupFile),
            online: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        )
    }

    /// The smallest quota of the process's cgroup and of each parent up to `cgroupRoot`: a
    /// parent's limit holds for everything under it. Nil without a cgroup v2 line or a quota.
    static func cgroupQuota(cgroupRoot: String, cgroupFile: String) -> Double? {
        guard let membership = contents(of: cgroupFile), var components = cgroupPath(membership: membership) else { return nil }
        var smallest: Double?
        while true {
            let directory = ([cgroupRoot] + components).joined(separator: "/")
            if let text = contents(of: directory + "/cpu.max"), let quota = quota(cpuMax: text) {
                smallest = min(smallest ?? quota, quota)
            }
            if components.isEmpty { return smallest }
            components.removeLast()
        }
    }

    /// The folders of the process's cgroup below the hierarchy's root, from `/proc/self/cgroup`:
    /// `0::/system.slice/tokengate.service` gives `["system.slice", "tokengate.service"]`, and
    /// `0::/` (inside a container's cgroup namespace) none. Nil without a cgroup v2 line (cgroup
    /// v1 only). A path leading out of the root (`..`, a cgroup outside the namespace) counts
    /// as the root.
    static func cgroupPath(membership: String) -> [String]? {
        for line in membership.split(separator: "\n") where line.hasPrefix("0::/") {
            let components = line.dropFirst(4).split(separator: "/").map(String.init).filter { $0 != "." }
            return components.contains("..") ? [] : components
        }
        return nil
    }

    /// The CPUs a `cpu.max` file allows: `150000 100000` (microseconds of CPU time per period)
    /// is 1.5. Nil for `max 100000` (no limit) and for anything malformed, which is ignored.
    static func quota(cpuMax: String) -> Double? {
        let fields = cpuMax.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" })
        guard fields.count == 2, let quota = Int(fields[0]), let period = Int(fields[1]), quota > 0, period > 0 else { return nil }
        return Double(quota) / Double(period)
    }

    /// A small file's text (the kernel's pseudo-files report no size: read to the end), or nil
    /// when it cannot be read.
    static func contents(of path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 16 {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

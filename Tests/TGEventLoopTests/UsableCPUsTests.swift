import Foundation
import Testing

@testable import TGEventLoop

@Suite struct UsableCPUsTests {
    /// A cgroup hierarchy in a folder of its own: `cpuMax` maps a cgroup's path (`""` the root)
    /// to its `cpu.max`; `membership` is the process's `/proc/self/cgroup`, nil for none.
    struct Hierarchy {
        let root: URL
        let cgroupFile: String

        init(membership: String?, cpuMax: [String: String]) throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("tg-cgroup-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            for (path, text) in cpuMax {
                let folder = path.isEmpty ? root : root.appendingPathComponent(path)
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                try text.write(to: folder.appendingPathComponent("cpu.max"), atomically: true, encoding: .utf8)
            }
            cgroupFile = root.appendingPathComponent("self-cgroup").path
            if let membership { try membership.write(toFile: cgroupFile, atomically: true, encoding: .utf8) }
        }

        func quota() -> Double? { UsableCPUs.cgroupQuota(cgroupRoot: root.path, cgroupFile: cgroupFile) }

        func current() -> UsableCPUs { UsableCPUs.current(cgroupRoot: root.path, cgroupFile: cgroupFile) }

        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    @Test func cpuMaxGivesCPUsPerPeriodAndNothingForMaxOrAMalformedFile() {
        let cases: [(String, Double?)] = [
            ("max 100000\n", nil), ("150000 100000\n", 1.5), ("50000 100000\n", 0.5), ("200000 100000", 2),
            ("100000 50000\n", 2), ("1000 100000\n", 0.01),
            // Malformed: ignored, as if there were no limit.
            ("", nil), ("\n", nil), ("150000\n", nil), ("150000 100000 7\n", nil), ("1.5 1\n", nil), ("-100000 100000\n", nil),
            ("0 100000\n", nil), ("100000 0\n", nil), ("100000 max\n", nil), ("quota period\n", nil),
        ]
        for (text, cpus) in cases { #expect(UsableCPUs.quota(cpuMax: text) == cpus, "\(text.debugDescription)") }
    }

    @Test func aQuotaCountsAsWholeCPUsRoundedUpAndAtLeastOne() {
        let cases: [(Double?, Int)] = [(nil, 64), (1.5, 2), (0.5, 1), (0.01, 1), (2, 2), (2.000_01, 3), (1e30, 64)]
        for (quota, count) in cases {
            #expect(UsableCPUs(affinity: 64, quota: quota, online: 64).count == count, "\(String(describing: quota))")
        }
    }

    @Test func theFewestOfAffinityQuotaAndOnlineCount() {
        #expect(UsableCPUs(affinity: 1, quota: 4, online: 64).count == 1)
        #expect(UsableCPUs(affinity: 8, quota: 2.5, online: 64).count == 3)
        #expect(UsableCPUs(affinity: 8, quota: nil, online: 4).count == 4)
        #expect(UsableCPUs(affinity: nil, quota: nil, online: 2).count == 2)
        #expect(UsableCPUs(affinity: nil, quota: nil, online: 0).count == 1)
        #expect(UsableCPUs(affinity: 8, quota: 2.5, online: 64).description == "3 (affinity 8, cgroup quota 2.5, online 64)")
    }

    @Test func theCgroupIsTheV2LineOfProcSelfCgroup() {
        #expect(UsableCPUs.cgroupPath(membership: "0::/system.slice/tokengate.service\n") == ["system.slice", "tokengate.service"])
        #expect(UsableCPUs.cgroupPath(membership: "0::/\n") == [])
        // A hybrid host: cgroup v1 controllers besides the v2 line.
        #expect(UsableCPUs.cgroupPath(membership: "4:memory:/a\n1:cpu:/b\n0::/c/d\n") == ["c", "d"])
        // cgroup v1 only.
        #expect(UsableCPUs.cgroupPath(membership: "4:memory:/a\n1:cpu,cpuacct:/b\n") == nil)
        #expect(UsableCPUs.cgroupPath(membership: "") == nil)
        // A cgroup outside this view of the hierarchy counts as its root.
        #expect(UsableCPUs.cgroupPath(membership: "0::/../../x\n") == [])
    }

    @Test func aParentsSmallerQuotaHoldsForTheCgroupsBelowIt() throws {
        let hierarchy = try Hierarchy(
            membership: "0::/kubepods/pod1/container\n",
            cpuMax: ["kubepods": "max 100000\n", "kubepods/pod1": "50000 100000\n", "kubepods/pod1/container": "300000 100000\n"]
        )
        defer { hierarchy.remove() }
        #expect(hierarchy.quota() == 0.5)
        #expect(hierarchy.current().count == 1)
    }

    @Test func aChildsSmallerQuotaWinsOverItsParentsAndAMalformedOneIsSkipped() throws {
        let hierarchy = try Hierarchy(
            membership: "0::/a/b/c\n",
            cpuMax: ["": "800000 100000\n", "a": "400000 100000\n", "a/b": "garbage\n", "a/b/c": "150000 100000\n"]
        )
        defer { hierarchy.remove() }
        #expect(hierarchy.quota() == 1.5)
    }

    @Test func withoutACgroupV2QuotaTheCountFallsBackToAffinityAndOnline() throws {
        let online = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let withoutQuota = [
            // No file naming the process's cgroup.
            try Hierarchy(membership: nil, cpuMax: ["": "50000 100000\n"]),
            // cgroup v1 only: no `0::` line, so no cpu.max is read.
            try Hierarchy(membership: "1:cpu,cpuacct:/\n", cpuMax: ["": "50000 100000\n"]),
            // cgroup v2 without the cpu controller (no cpu.max anywhere), and with `max`.
            try Hierarchy(membership: "0::/user.slice\n", cpuMax: [:]),
            try Hierarchy(membership: "0::/user.slice\n", cpuMax: ["user.slice": "max 100000\n"]),
        ]
        for hierarchy in withoutQuota {
            defer { hierarchy.remove() }
            let cpus = hierarchy.current()
            #expect(cpus.quota == nil)
            #expect(cpus.online == online)
            #expect(cpus.count == min(online, cpus.affinity ?? online))
        }
    }

    @Test func thisProcessMayUseAtLeastOneCPUAndNoMoreThanAreOnline() {
        let cpus = UsableCPUs.current()
        #expect(cpus.affinity != nil)
        #expect(cpus.count >= 1 && cpus.count <= cpus.online)
        #expect(EventLoopGroup.defaultCount == cpus.count)
    }
}

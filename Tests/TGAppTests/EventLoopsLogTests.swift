import Foundation
import TGApp
import TGEventLoop
import Testing

@Suite struct EventLoopsLogTests {
    static let environment = ["TOKENGATE_DATABASE_URL": "postgresql://u@127.0.0.1/db"]

    /// A container limited to 1.5 CPUs on a 64-core node: two loops, not 64, and the line says
    /// what limited them.
    @Test func aContainerLimitedToOneAndAHalfCPUsOnSixtyFourCoresRunsTwoLoopsAndSaysWhy() throws {
        let sink = CapturingLogSink()
        let configuration = try ConfigurationLoader.load(path: nil, environment: Self.environment)
        TokenGateApp.logEventLoops(configuration, logger: capturingLogger(sink), cpus: UsableCPUs(affinity: 64, quota: 1.5, online: 64))
        let line = try #require(sink.lines.first)
        #expect(
            line.hasSuffix(
                #""message":"event loops","cpu_affinity":64,"cpu_quota":1.5,"cpus_online":64,"cpus_usable":2,"loops":2,"loops_from":"cpus"}"#
            ),
            "\(line)"
        )
    }

    @Test func serverThreadsSetsTheLoopsWhateverTheCPUsAndTheLineSaysSo() throws {
        let sink = CapturingLogSink()
        let configuration = try ConfigurationLoader.load(path: nil, environment: Self.environment.merging(["TOKENGATE_SERVER_THREADS": "3"]) { $1 })
        TokenGateApp.logEventLoops(configuration, logger: capturingLogger(sink), cpus: UsableCPUs(affinity: nil, quota: nil, online: 8))
        let line = try #require(sink.lines.first)
        #expect(
            line.hasSuffix(
                #""message":"event loops","cpu_affinity":"unknown","cpu_quota":"none","cpus_online":8,"cpus_usable":8,"loops":3,"loops_from":"server.threads"}"#
            ),
            "\(line)"
        )
    }
}

import HTTPTypes
import TGHTTPServer

/// `GET /healthz` (the process answers) and `GET /readyz` (it can serve: dependencies reachable).
/// Both listeners serve them: the public one for orchestrators and load balancers, which learn
/// only ready or not, and the admin listener, whose `/readyz` names each check
/// (docs/operations.md, "The admin listener").
public enum HealthRoutes {
    /// A named readiness check; it returns false when the dependency is not usable.
    public struct Check: Sendable {
        public var name: String
        public var run: @Sendable () async -> Bool

        public init(name: String, run: @escaping @Sendable () async -> Bool) {
            self.name = name
            self.run = run
        }
    }

    /// The checks `/readyz` runs, all at once; each whole run also reports every result to `record`
    /// (the `tokengate_dependency_up` gauge, ``TokenGateMetrics/recordDependency(_:up:)``).
    public struct Readiness: Sendable {
        public var checks: [Check]
        public var record: (@Sendable (_ name: String, _ up: Bool) -> Void)?

        public init(checks: [Check], record: (@Sendable (_ name: String, _ up: Bool) -> Void)? = nil) {
            self.checks = checks
            self.record = record
        }

        /// Each check's result, by name.
        public func run() async -> [String: Bool] {
            var results: [String: Bool] = [:]
            await withTaskGroup(of: (String, Bool).self) { group in
                for check in checks { group.addTask { (check.name, await check.run()) } }
                for await (name, ok) in group { results[name] = ok }
            }
            // A run cut short (a probe past its deadline, the monitor at shutdown) saw its checks
            // cancelled, not failing: it records nothing.
            if let record, !Task.isCancelled { for (name, ok) in results { record(name, ok) } }
            return results
        }
    }

    /// `detail`: `/readyz` names each check and its result (the admin listener); without it only
    /// `{"status": "ready"}` or `{"status": "not_ready"}` (the public port: an outsider learns
    /// nothing of the database or the providers). 200 or 503 either way.
    public static func add(to router: inout Router, version: String, readiness: Readiness, detail: Bool) {
        // Its fields as bytes, made once: sent without walking `HTTPFields` (copying each field)
        // on every probe.
        var alive = ServerResponse(status: .ok, body: .bytes(JSON.encode(["status": "ok", "version": version])))
        alive.rawHeaderFields.append(name: "Cache-Control", value: "no-store")
        alive.rawHeaderFields.append(name: "Content-Type", value: "application/json")
        router.add(.get, "/healthz", .sync { [alive] _, _ in alive })
        router.add(
            .get,
            "/readyz",
            .async { _, _ in
                let results = await readiness.run()
                let ready = results.values.allSatisfy { $0 }
                let status = ready ? "ready" : "not_ready"
                let checks = detail ? results.mapValues { $0 ? "ok" : "failing" } : nil
                return JSON.response(ready ? .ok : .serviceUnavailable, ReadinessAnswer(status: status, checks: checks))
            }
        )
    }

    /// The same, with `checks` and nothing recorded.
    public static func add(to router: inout Router, version: String, checks: [Check], detail: Bool) {
        add(to: &router, version: version, readiness: Readiness(checks: checks), detail: detail)
    }
}

/// `/readyz`'s answer: ready or not, and with the detail each check's result.
private struct ReadinessAnswer: Encodable {
    var status: String
    var checks: [String: String]?
}

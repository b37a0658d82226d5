import HTTPTypes
import TGHTTPServer

/// `GET /healthz` (the process answers) and `GET /readyz` (it can serve: dependencies reachable).
public enum HealthRoutes {
    /// A named readiness check; it throws (or returns false) when the dependency is not usable.
    public struct Check: Sendable {
        public var name: String
        public var run: @Sendable () async -> Bool

        public init(name: String, run: @escaping @Sendable () async -> Bool) {
            self.name = name
            self.run = run
        }
    }

    public static func add(to router: inout Router, version: String, checks: [Check]) {
        // Its fields as bytes, made once: sent without walking `HTTPFields` (copying each field)
        // on every probe.
        var alive = ServerResponse(status: .ok, body: .bytes(Array(JSON.encode(["status": "ok", "version": version]).utf8)))
        alive.rawHeaderFields.append(name: "Cache-Control", value: "no-store")
        alive.rawHeaderFields.append(name: "Content-Type", value: "application/json")
        router.add(.get, "/healthz", .sync { [alive] _, _ in alive })
        router.add(
            .get,
            "/readyz",
            .async { _, _ in
                var results: [String: String] = [:]
                await withTaskGroup(of: (String, Bool).self) { group in
                    for check in checks { group.addTask { (check.name, await check.run()) } }
                    for await (name, ok) in group { results[name] = ok ? "ok" : "failing" }
                }
                let ready = results.values.allSatisfy { $0 == "ok" }
                let body = JSON.encode(["status": ready ? "ready" : "not_ready", "checks": results])
                return ServerResponse(
                    status: ready ? .ok : .serviceUnavailable,
                    contentType: "application/json",
                    body: body,
                    headerFields: [.cacheControl: "no-store"]
                )
            }
        )
    }
}

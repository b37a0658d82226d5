import CoreMetrics
import HTTPTypes
public import Prometheus
import Synchronization
public import TGAuth
import TGHTTPServer
import TGPostgres
import TGProxy

/// `GET /metrics` on the admin listener (docs/operations.md, "Metrics"): the Prometheus text
/// format of one registry per instance.
/// The domain counts through swift-metrics (``AuthMetrics``); this records the HTTP side and,
/// at each scrape, the gauges of the database pool and the caches.
public final class TokenGateMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    public let factory: PrometheusMetricsFactory
    /// Requests by route, method and status, and their latency: counted per event loop
    /// (``RequestMetrics``), outside the registry.
    private let requestMetrics = RequestMetrics()

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = RequestMetrics.bucketBounds
        self.factory = factory
    }

    /// The domain's view of the same registry.
    public var auth: AuthMetrics { AuthMetrics(factory: factory) }

    /// Methods that get a label of their own, by number; anything else is `other` (0): label sets
    /// stay bounded whatever clients send.
    static let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete, .options]

    static func methodNumber(_ method: HTTPRequest.Method) -> Int {
        methods.firstIndex(of: method).map { $0 + 1 } ?? 0
    }

    /// Route, method and status as one integer (a status outside 0...4095 is clamped; HTTP has
    /// three digits).
    static func requestKey(route: RouteName, method: Int, status: Int) -> Int {
        route.id << 16 | method << 12 | min(max(status, 0), 4095)
    }

    /// One answered request: by route pattern (`-` when none matched), method and status; its
    /// time to the response head in nanoseconds.
    func request(route: RouteName, method: HTTPRequest.Method, status: Int, nanoseconds: Int64, shard: Int = 0) {
        let methodNumber = Self.methodNumber(method)
        requestMetrics.record(
            key: Self.requestKey(route: route, method: methodNumber, status: status),
            labels: { (route.pattern, methodNumber == 0 ? "other" : Self.methods[methodNumber - 1].rawValue, status) },
            nanoseconds: nanoseconds,
            shard: shard
        )
    }

    /// `tokengate_dependency_up`: 1 when the readiness check `dependency` (`database`,
    /// `provider:<name>`) last passed, 0 when it failed; set by every run of the checks
    /// (``HealthRoutes/Readiness``: `/readyz` on either listener and ``DependencyMonitor``).
    public func recordDependency(_ dependency: String, up: Bool) {
        CoreMetrics.Gauge(label: "tokengate_dependency_up", dimensions: [("dependency", dependency)], factory: factory).record(up ? 1 : 0)
    }

    /// `tokengate_proxy_streams_ended_total{cause}`: proxied streams ended with their session,
    /// `session_ended` when its end was announced, `session_expired` when this instance found it
    /// no longer live (expired, or gone unannounced while the listener was away).
    func streamsEnded(_ count: Int, cause: String) {
        guard count > 0 else { return }
        CoreMetrics.Counter(label: "tokengate_proxy_streams_ended_total", dimensions: [("cause", cause)], factory: factory)
            .increment(by: count)
    }

    /// The whole scrape: the registry's metrics, then the request counts.
    func emit() -> [UInt8] {
        var buffer = registry.emitToBuffer()
        requestMetrics.emit(into: &buffer)
        return buffer
    }

    /// Adds `GET /metrics` (to the admin listener's router, ``TokenGateApp/makeAdminRouter``);
    /// `database`, `cache` and `streams` give the gauges read at each scrape.
    func addRoute(to router: inout Router, database: PostgresClient, cache: CredentialCache?, streams: OpenStreams? = nil) {
        router.add(
            .get,
            "/metrics",
            .sync { [self] _, _ in
                let pool = [
                    ("open", database.openConnections), ("idle", database.idleConnections),
                    ("waiting", database.waitingForConnection),
                ]
                for (state, count) in pool {
                    CoreMetrics.Gauge(label: "tokengate_db_pool_connections", dimensions: [("state", state)], factory: factory).record(count)
                }
                if let cache {
                    let counts = cache.counts
                    CoreMetrics.Gauge(label: "tokengate_cache_entries", dimensions: [("kind", "sessions")], factory: factory).record(counts.sessions)
                    CoreMetrics.Gauge(label: "tokengate_cache_entries", dimensions: [("kind", "upstream_tokens")], factory: factory)
                        .record(counts.tokens)
                }
                if let streams {
                    CoreMetrics.Gauge(label: "tokengate_proxy_streams_open", factory: factory).record(streams.count)
                }
                return ServerResponse(
                    status: .ok,
                    headerFields: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                    body: .bytes(emit())
                )
            }
        )
    }
}

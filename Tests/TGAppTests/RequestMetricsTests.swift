import Testing

@testable import TGApp

/// The request counts kept per event loop: summed over the loops at a scrape, latencies in
/// cumulative buckets, and text that the Prometheus client parses.
@Suite struct RequestMetricsTests {
    static func key(_ route: Int, _ status: Int) -> Int { route << 16 | 1 << 12 | status }

    @Test func countsFromEveryLoopAreSummedIntoOneSampleEach() async throws {
        let metrics = RequestMetrics(shards: 4)
        let route = "/api/{upstream}/**"
        // Three loops answer the same route; one of them also answers a 401.
        for (shard, nanoseconds) in [(0, 500_000), (1, 1_500_000), (2, 40_000_000_000), (1, 3_000_000)] {
            metrics.record(key: Self.key(7, 200), labels: { (route, "GET", 200) }, nanoseconds: Int64(nanoseconds), shard: shard)
        }
        metrics.record(key: Self.key(7, 401), labels: { (route, "GET", 401) }, nanoseconds: 200_000, shard: 3)
        // Shard numbers wrap: loop 5 of a group of 4 shards counts into shard 1.
        metrics.record(key: Self.key(8, 200), labels: { ("/a\"b\\c", "GET", 200) }, nanoseconds: 1_000_000, shard: 5)

        var buffer: [UInt8] = []
        metrics.emit(into: &buffer)
        let samples = try await MetricsTests.parse(String(decoding: buffer, as: UTF8.self))
        func value(_ name: String, _ labels: [String: String]) -> Double? { MetricsTests.value(samples, name, labels) }
        let proxied = ["route": route, "method": "GET"]
        #expect(value("tokengate_http_requests_total", proxied.merging(["status": "200"]) { $1 }) == 4)
        #expect(value("tokengate_http_requests_total", proxied.merging(["status": "401"]) { $1 }) == 1)
        // The histogram is by route: both statuses, every loop.
        let duration = "tokengate_http_request_duration_seconds"
        #expect(value("\(duration)_count", ["route": route]) == 5)
        #expect(value("\(duration)_bucket", ["route": route, "le": "0.001"]) == 2)
        #expect(value("\(duration)_bucket", ["route": route, "le": "0.002"]) == 3)
        #expect(value("\(duration)_bucket", ["route": route, "le": "0.005"]) == 4)
        #expect(value("\(duration)_bucket", ["route": route, "le": "30.0"]) == 4)
        #expect(value("\(duration)_bucket", ["route": route, "le": "+Inf"]) == 5)
        let sum = try #require(value("\(duration)_sum", ["route": route]))
        #expect(abs(sum - 40.0052) < 1e-9)
        // A quote and a backslash in a label value are escaped, and read back as they were.
        #expect(value("tokengate_http_requests_total", ["route": "/a\"b\\c", "status": "200"]) == 1)
    }

    @Test func nothingRecordedEmitsNothing() {
        var buffer: [UInt8] = []
        RequestMetrics().emit(into: &buffer)
        #expect(buffer.isEmpty)
    }
}

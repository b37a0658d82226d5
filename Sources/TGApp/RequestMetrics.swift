import Prometheus
import Synchronization
import TGBase
import TGEventLoop

/// `tokengate_http_requests_total` and `tokengate_http_request_duration_seconds`: counted per
/// event loop (a shard each, under its own lock, which only that loop takes on the hot path) and
/// summed into Prometheus text at each scrape. Counting them through the shared registry had
/// every request of every loop write the same counter and take the same histogram lock.
struct RequestMetrics: Sendable {
    /// Upper bounds of the latency buckets, from 1 ms (a cached proxy hop takes a few) to 30 s.
    static let bucketBounds: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
        .seconds(10), .seconds(30),
    ]
    private static let boundNanoseconds: [Int64] = bucketBounds.map(EventLoop.nanoseconds)

    /// The counts of one (route, method, status) on one shard.
    struct Entry: Sendable {
        let route: String
        let method: String
        let status: Int
        var count = 0
        /// Observations per bucket (not cumulative); the last one is past every bound (+Inf).
        var buckets = [Int](repeating: 0, count: RequestMetrics.bucketBounds.count + 1)
        var sumNanoseconds: Int64 = 0
    }

    final class Shard: Sendable {
        let entries = Mutex<[WordKey: Entry]>([:])
        /// Room that keeps two shards off one cache line (each loop writes its own on every request).
        private let padding = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    }

    private let shards: [Shard]

    /// `shards` is a power of two; loop `n` counts into shard `n` modulo it.
    init(shards: Int = 16) {
        self.shards = (0..<shards).map { _ in Shard() }
    }

    /// One answered request under `key` (the caller's integer for route, method and status;
    /// `labels` are read only the first time a shard sees the key).
    func record(key: Int, labels: () -> (route: String, method: String, status: Int), nanoseconds: Int64, shard: Int) {
        let bucket = Self.boundNanoseconds.firstIndex { nanoseconds <= $0 } ?? Self.boundNanoseconds.count
        // The process's own number: hashed by one multiplication (``WordKey``).
        let key = WordKey(UInt64(UInt(bitPattern: key)))
        shards[shard & (shards.count - 1)].entries.withLock { entries in
            // In place: through `values[index]` the entry's buckets stay uniquely referenced (an
            // optional-chained `entries[key]?` write would copy them on every request).
            if let index = entries.index(forKey: key) {
                entries.values[index].add(bucket: bucket, nanoseconds: nanoseconds)
            } else {
                let made = labels()
                var entry = Entry(route: made.route, method: made.method, status: made.status)
                entry.add(bucket: bucket, nanoseconds: nanoseconds)
                entries[key] = entry
            }
        }
    }

    /// Both families in the Prometheus text format (0.0.4), every shard summed.
    func emit(into buffer: inout [UInt8]) {
        var merged: [WordKey: Entry] = [:]
        for shard in shards {
            for (key, entry) in shard.entries.withLock({ $0 }) {
                merged[key, default: Entry(route: entry.route, method: entry.method, status: entry.status)].merge(entry)
            }
        }
        guard !merged.isEmpty else { return }
        let entries = merged.values.sorted { ($0.route, $0.method, $0.status) < ($1.route, $1.method, $1.status) }
        buffer.append(contentsOf: "# TYPE tokengate_http_requests_total counter\n".utf8)
        for entry in entries {
            let labels = Self.labels([("route", entry.route), ("method", entry.method), ("status", String(entry.status))])
            buffer.append(contentsOf: "tokengate_http_requests_total{\(labels)} \(entry.count)\n".utf8)
        }
        // The latency histogram is by route alone.
        var byRoute: [(route: String, entry: Entry)] = []
        for entry in entries {
            if let last = byRoute.indices.last, byRoute[last].route == entry.route {
                byRoute[last].entry.merge(entry)
            } else {
                var first = Entry(route: entry.route, method: "", status: 0)
                first.merge(entry)
                byRoute.append((entry.route, first))
            }
        }
        let name = "tokengate_http_request_duration_seconds"
        buffer.append(contentsOf: "# TYPE \(name) histogram\n".utf8)
        for (route, entry) in byRoute {
            let labels = Self.labels([("route", route)])
            var cumulative = 0
            for (index, bound) in Self.bucketBounds.enumerated() {
                cumulative += entry.buckets[index]
                buffer.append(contentsOf: "\(name)_bucket{\(labels),le=\"\(bound.bucketRepresentation)\"} \(cumulative)\n".utf8)
            }
            buffer.append(contentsOf: "\(name)_bucket{\(labels),le=\"+Inf\"} \(entry.count)\n".utf8)
            buffer.append(contentsOf: "\(name)_sum{\(labels)} \(Duration.nanoseconds(entry.sumNanoseconds).bucketRepresentation)\n".utf8)
            buffer.append(contentsOf: "\(name)_count{\(labels)} \(entry.count)\n".utf8)
        }
    }

    /// `name="value",…` with the values escaped as the text format asks (backslash, quote, newline).
    static func labels(_ pairs: [(String, String)]) -> String {
        pairs.map { name, value in
            var escaped = ""
            for character in value {
                switch character {
                case "\\": escaped += "\\\\"
                case "\"": escaped += "\\\""
                case "\n": escaped += "\\n"
                default: escaped.append(character)
                }
            }
            return "\(name)=\"\(escaped)\""
        }.joined(separator: ",")
    }
}

extension RequestMetrics.Entry {
    fileprivate mutating func add(bucket: Int, nanoseconds: Int64) {
        count += 1
        buckets[bucket] += 1
        sumNanoseconds &+= nanoseconds
    }

    fileprivate mutating func merge(_ other: Self) {
        count += other.count
        for index in buckets.indices { buckets[index] += other.buckets[index] }
        sumNanoseconds &+= other.sumNanoseconds
    }
}

public import HTTPTypes
import Synchronization
public import TGAuth
public import TGHTTPServer

#if canImport(Glibc)
import Glibc
import TGBase
#endif

/// What a route handler is given besides the request.
public class RequestInfo: @unchecked Sendable {
    // A class, made once per request and never changed: a route's call, its handler and its
    // finish each hold it with one count, where copying its strings took several (a route
    // with a session policy makes another one with the session, ``withSession(_:)``).
    // Unchecked: every property is a `let` of a Sendable type; the one subclass, a loop route's
    // call (`LoopCall`, which is its request's info: one object per call, not two), keeps the
    // invariant it states.
    /// The request id (from a well-formed `X-Request-ID`, else generated); echoed in the response.
    public let requestID: String
    /// Values of the route's `{name}` segments (and `rest` for a trailing `**`), percent-decoded.
    public let parameters: RouteParameters
    /// The client's address as TokenGate sees it.
    public let clientAddress: String?
    /// The session the bearer token names, for a route whose policy requires one.
    public let session: SessionContext?

    public init(
        requestID: String,
        parameters: RouteParameters = RouteParameters(),
        clientAddress: String? = nil,
        session: SessionContext? = nil
    ) {
        self.requestID = requestID
        self.parameters = parameters
        self.clientAddress = clientAddress
        self.session = session
    }

    /// The same request's info with `session`.
    func withSession(_ session: SessionContext) -> RequestInfo {
        RequestInfo(requestID: requestID, parameters: parameters, clientAddress: clientAddress, session: session)
    }
}

/// A route's parameters by name: a few pairs, looked up by scanning (a dictionary per request
/// costs more than it saves). The first two are kept inline (an API call has two, `upstream` and
/// `rest`, mostly strings short enough to need no allocation either): no array per request.
public struct RouteParameters: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    private typealias Pair = (name: String, value: String)
    private var first: Pair?
    private var second: Pair?
    private var more: [Pair]?

    /// No parameters (what a literal route binds; `[:]` walks an empty list first).
    public init() {}

    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { self[name] = value }
    }

    public subscript(name: String) -> String? {
        get {
            if let first, first.name == name { return first.value }
            if let second, second.name == name { return second.value }
            return more?.first { $0.name == name }?.value
        }
        set {
            var pairs = self.pairs.filter { $0.name != name }
            if let newValue { pairs.append((name, newValue)) }
            self = RouteParameters()
            for pair in pairs { add(pair.name, pair.value) }
        }
    }

    private var pairs: [Pair] { [first, second].compactMap { $0 } + (more ?? []) }

    /// Adds a pair whose name is not there yet (a pattern names each parameter once).
    mutating func add(_ name: String, _ value: String) {
        if first == nil {
            first = (name, value)
        } else if second == nil {
            second = (name, value)
        } else {
            more = (more ?? []) + [(name, value)]
        }
    }

    public static func == (lhs: RouteParameters, rhs: RouteParameters) -> Bool {
        let left = lhs.pairs
        return left.count == rhs.pairs.count && left.allSatisfy { rhs[$0.name] == $0.value }
    }
}

/// A route's pattern (its label in metrics and logs) and a number the router gave it: the request
/// metrics find a route's counters by that number instead of hashing the pattern on every call.
public struct RouteName: Sendable {
    public let pattern: String
    let id: Int

    /// No route matched (`-`).
    static let unmatched = RouteName(pattern: "-", id: 0)
}

/// Maps method and path to a handler. Literal paths are found by hashing; patterns with `{name}`
/// segments or a trailing `**` are tried in the order they were added.
public struct Router: Sendable {
    /// A handler that needs no I/O runs on the event-loop thread (`sync`); one whose I/O can be
    /// done from the loop itself starts there and answers later (`loop`); anything else is `async`.
    public enum Handler: Sendable {
        case sync(@Sendable (ServerRequest, RequestInfo) -> ServerResponse)
        case async(@Sendable (ServerRequest, RequestInfo) async throws -> ServerResponse)
        case loop(@Sendable (ServerRequest, RequestInfo, RouteResponder) -> Void)
    }

    /// A route, made once when it is added. A class: every request's match hands one on (into
    /// the result, the call, its finish), and a reference is one count where the fields' copy
    /// took several.
    final class Route: Sendable {
        let method: HTTPRequest.Method
        let name: RouteName
        let handler: Handler
        let policy: RoutePolicy
        var pattern: String { name.pattern }

        init(method: HTTPRequest.Method, name: RouteName, handler: Handler, policy: RoutePolicy) {
            self.method = method
            self.name = name
            self.handler = handler
            self.policy = policy
        }
    }

    /// One segment of a pattern.
    enum Segment: Sendable, Equatable {
        case literal(Substring)
        case parameter(String)
        /// `**`: the rest of the path, as sent (its own parser decides how to read it).
        case rest
    }

    /// The routes that share one pattern, in the order they were added: the pattern is bound
    /// once, then the method chooses.
    struct Pattern: Sendable {
        var text: String
        var segments: [Segment]
        /// The parameter that chooses the pattern's limits (``RouteLimits/byParameter(_:_:)``):
        /// the server looks the limits up by its bytes as sent, before any route is matched, so
        /// it binds only as sent. An escaped spelling (`/api/%67raph/…` for `graph`) would reach
        /// the route without the limits meant for it; it matches nothing instead (404).
        var plainOnly: String?
        var routes: [Route]
        /// The bytes of the first segment when it is a literal (`auth` of `/auth/accounts/{id}`):
        /// a path whose first segment differs is passed over without walking the pattern.
        var firstLiteral: [UInt8]?
    }

    private var literal: [String: [Route]] = [:]
    /// Bit n set: some literal path is n bytes long (bit 63: 63 or more). A path of another length
    /// skips the hash lookup (every API call's path is a pattern's).
    private var literalLengths: UInt64 = 0
    private var patterns: [Pattern] = []
    /// The body limits and deadlines routes declared, by pattern (a pattern's limits apply to
    /// every method of it). Few: looked up by scanning.
    private var limited: [Limited] = []

    /// A pattern's declared limits, with what finds them fast: the bytes of its leading literal
    /// segments (`/api/`), and whether the rest is one parameter and `**`, the limits by that
    /// parameter (the API routes: then one comparison of the name, no walk).
    struct Limited: Sendable {
        var segments: [Segment]
        var limits: RouteLimits
        var prefix: [UInt8]
        var byNameThenRest: [(value: [UInt8], limits: HTTPServer.RequestLimits)]?

        init(_ segments: [Segment], _ limits: RouteLimits) {
            self.segments = segments
            self.limits = limits
            let literals = segments.prefix { $0.isLiteral }.map { segment -> Substring in
                if case .literal(let text) = segment { return text }
                return ""
            }
            let tail = segments.dropFirst(literals.count)
            prefix = Array(literals.joined(separator: "/").utf8) + (tail.isEmpty ? [] : [UInt8(ascii: "/")])
            byNameThenRest = nil
            if tail.count == 2, case .parameter(let name) = tail.first!, tail.last! == .rest, case .byParameter(name, let table) = limits {
                byNameThenRest = table
            }
        }
    }

    /// Route numbers are unique in the process: two routers (tests build many) never give one
    /// number to two patterns that might share a metrics registry.
    private static let routeNumbers = Atomic<Int>(0)

    public init() {}

    /// Every route as (method, pattern), sorted: what `openapi.yaml` must describe.
    public var routes: [(method: String, pattern: String)] {
        (literal.values.flatMap { $0 } + patterns.flatMap(\.routes)).map { ($0.method.rawValue, $0.pattern) }.sorted {
            ($0.pattern, $0.method) < ($1.pattern, $1.method)
        }
    }

    /// Adds a route. `pattern` is a path such as `/auth/token`, `/auth/accounts/{id}` or
    /// `/api/{upstream}/**`.
    /// `policy`: what the route requires before its handler runs (rate limit, session, limits).
    public mutating func add(_ method: HTTPRequest.Method, _ pattern: String, policy: RoutePolicy = .none, _ handler: Handler) {
        let number = Self.routeNumbers.add(1, ordering: .relaxed).newValue
        // What each request needs of the policy travels with the route; the declared limits are
        // the server's, kept in `limited` (a route is copied out of the table on every match).
        var perRequest = policy
        perRequest.limits = nil
        let route = Route(method: method, name: RouteName(pattern: pattern, id: number), handler: handler, policy: perRequest)
        let segments = pattern.split(separator: "/", omittingEmptySubsequences: false).map { segment -> Segment in
            if segment == "**" { return .rest }
            if segment.hasPrefix("{"), segment.hasSuffix("}") { return .parameter(String(segment.dropFirst().dropLast())) }
            return .literal(segment)
        }
        let names = segments.compactMap { segment -> String? in
            if case .parameter(let name) = segment { return name }
            return segment == .rest ? "rest" : nil
        }
        precondition(Set(names).count == names.count, "\(pattern): a pattern names each parameter once")
        precondition(
            policy.session == nil || handler.isAsync,
            "\(pattern): a route that requires a session must be async (it may query the database)"
        )
        if let limits = policy.limits, !limited.contains(where: { $0.segments == segments }) { limited.append(Limited(segments, limits)) }
        guard segments.contains(where: { !$0.isLiteral }) else {
            literal[pattern, default: []].append(route)
            literalLengths |= 1 << min(63, pattern.utf8.count)
            return
        }
        var plainOnly: String?
        if case .byParameter(let name, _)? = policy.limits { plainOnly = name }
        if let index = patterns.firstIndex(where: { $0.text == pattern }) {
            patterns[index].routes.append(route)
            if patterns[index].plainOnly == nil { patterns[index].plainOnly = plainOnly }
        } else {
            var firstLiteral: [UInt8]?
            if segments.count > 1, case .literal(let text) = segments[1] { firstLiteral = Array(text.utf8) }
            patterns.append(
                Pattern(
                    text: pattern,
                    segments: segments,
                    plainOnly: plainOnly,
                    routes: [route],
                    firstLiteral: firstLiteral
                )
            )
        }
    }

    /// The outcome of matching a request.
    enum Match {
        case found(Route, RouteParameters)
        /// The path exists but not for this method; the allowed methods.
        case methodNotAllowed([HTTPRequest.Method])
        case notFound
    }

    func match(_ method: HTTPRequest.Method, path: Substring) -> Match {
        var allowed: [HTTPRequest.Method] = []
        if literalLengths & (1 << min(63, path.utf8.count)) != 0, let routes = literal[String(path)] {
            if let route = Self.route(for: method, in: routes) { return .found(route, RouteParameters()) }
            allowed += routes.map(\.method)
        }
        let first = Self.firstSegment(of: path)
        // By index: iterating the patterns would copy each one (three arrays) per request.
        for index in patterns.indices {
            if let literal = patterns[index].firstLiteral, !Self.equal(first, literal, in: path) { continue }
            guard
                let parameters = Self.bind(
                    patterns[index].segments,
                    plainOnly: patterns[index].plainOnly,
                    to: path
                )
            else { continue }
            if let route = Self.route(for: method, in: patterns[index].routes) { return .found(route, parameters) }
            allowed += patterns[index].routes.map(\.method)
        }
        if allowed.contains(.get), !allowed.contains(.head) { allowed.append(.head) }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    /// The route for `method`; HEAD falls back to GET (RFC 9110 §9.3.2: the same answer without
    /// its body, which libmicrohttpd leaves out).
    private static func route(for method: HTTPRequest.Method, in routes: [Route]) -> Route? {
        if let route = routes.first(where: { $0.method == method }) { return route }
        return method == .head ? routes.first { $0.method == .get } : nil
    }

    /// The pattern's parameters in `path`, or nil when it does not fit. Works on the path's bytes
    /// in place (every API call comes through here, past the patterns before its own).
    /// `plainOnly`: a parameter that binds only without escapes (``Pattern/plainOnly``).
    private static func bind(_ pattern: [Segment], plainOnly: String?, to path: Substring) -> RouteParameters? {
        path.withUTF8Bytes { bind(pattern, plainOnly: plainOnly, to: $0) }
    }

    private static func bind(
        _ pattern: [Segment],
        plainOnly: String?,
        to bytes: UnsafeBufferPointer<UInt8>
    ) -> RouteParameters? {
        var parameters = RouteParameters()
        let end = walk(pattern, bytes) { name, actual in
            // Most values have nothing to decode (the path's bytes are UTF-8, split at `/`).
            let plain = memchr(actual.baseAddress!, Int32(UInt8(ascii: "%")), actual.count) == nil
            if !plain, name == plainOnly { return false }
            guard let value = plain ? String(decoding: actual, as: UTF8.self) : FormURLEncoding.percentDecode(actual, plusAsSpace: false)
            else { return false }
            parameters.add(name, value)
            return true
        }
        guard var start = end else { return nil }
        if case .rest? = pattern.last {
            // After the `/` that ends the previous segment (`/api/x` alone has an empty rest).
            if start != bytes.count { start += 1 }
            parameters.add("rest", String(decoding: UnsafeBufferPointer(rebasing: bytes[start...]), as: UTF8.self))
        }
        return consume parameters
    }

    /// Walks `bytes` along `pattern`, giving `parameter` each `{name}` segment's bytes (false:
    /// the path does not fit). Returns where a trailing `**` begins (before its `/`), or the end
    /// for a pattern without one; nil when the path does not fit. On the bytes in place.
    @inline(__always)
    private static func walk(
        _ pattern: [Segment],
        _ bytes: UnsafeBufferPointer<UInt8>,
        _ parameter: (String, UnsafeBufferPointer<UInt8>) -> Bool
    ) -> Int? {
        var start = 0
        for index in pattern.indices {
            if case .rest = pattern[index] { return start }
            // Segments after the first begin after a `/`.
            if index > 0 {
                guard start != bytes.count, bytes[start] == UInt8(ascii: "/") else { return nil }
                start += 1
            }
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: "/") { end += 1 }
            let actual = UnsafeBufferPointer(rebasing: bytes[start..<end])
            switch pattern[index] {
            case .literal(let text):
                guard Self.equal(actual, text) else { return nil }
            case .parameter(let name):
                guard !actual.isEmpty, parameter(name, actual) else { return nil }
            case .rest:
                return nil
            }
            start = end
        }
        return start == bytes.count ? start : nil
    }

    /// The routes' declared limits as they are now, for the server to look up as each request's
    /// head arrives (`HTTPServer.Configuration.limits`): one object whose entries are read in
    /// place, where a router captured by value gave a copy of its tables' references to every
    /// request. Made on each read: take it once, after the last route is added.
    public var limitsTable: LimitsTable { LimitsTable(limited) }

    /// See ``Router/limitsTable``.
    public final class LimitsTable: Sendable {
        let limited: [Limited]

        init(_ limited: [Limited]) { self.limited = limited }

        /// The body limit and deadline a route declared for a request to `path`, if any. On the
        /// path's bytes in place, without a string, a dictionary or an allocation (every
        /// request comes through here); the entries by index (a `for` over them copies each
        /// one, four arrays).
        public func limits(_ method: HTTPRequest.Method, path: Substring) -> HTTPServer.RequestLimits? {
            guard !limited.isEmpty else { return nil }
            return path.withUTF8Bytes { bytes in
                limited.withUnsafeBufferPointer { entries in
                    for index in entries.indices {
                        let prefix = entries[index].prefix.count
                        guard bytes.count >= prefix,
                            prefix == 0 || entries[index].prefix.withUnsafeBytes({ memcmp(bytes.baseAddress!, $0.baseAddress!, prefix) }) == 0
                        else { continue }
                        guard entries[index].byNameThenRest != nil else {
                            if let limits = Router.limits(entries[index].segments, entries[index].limits, bytes) { return limits }
                            continue
                        }
                        // `/api/{upstream}/**`: the name runs to the next `/` or the end.
                        let rest = UnsafeBufferPointer(rebasing: bytes[prefix...])
                        let end = rest.firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
                        let name = UnsafeBufferPointer(rebasing: rest[..<end])
                        guard !name.isEmpty else { continue }
                        if let limits = Router.limits(named: name, in: entries[index].byNameThenRest!) { return limits }
                    }
                    return nil
                }
            }
        }
    }

    /// The limits of the API named `name` in a `/api/{upstream}/**` table, by index in place.
    fileprivate static func limits(
        named name: UnsafeBufferPointer<UInt8>,
        in table: borrowing [(value: [UInt8], limits: HTTPServer.RequestLimits)]
    ) -> HTTPServer.RequestLimits? {
        table.withUnsafeBufferPointer { rows in
            for index in rows.indices where rows[index].value.count == name.count {
                let equal = rows[index].value.withUnsafeBufferPointer { value in
                    name.isEmpty || memcmp(value.baseAddress!, name.baseAddress!, name.count) == 0
                }
                if equal { return rows[index].limits }
            }
            return nil
        }
    }

    fileprivate static func limits(_ pattern: [Segment], _ limits: RouteLimits, _ bytes: UnsafeBufferPointer<UInt8>) -> HTTPServer.RequestLimits? {
        var found: HTTPServer.RequestLimits?
        if case .fixed(let fixed) = limits { found = fixed }
        let fits = walk(pattern, bytes) { name, actual in
            guard case .byParameter(name, let table) = limits else { return true }
            guard let entry = table.first(where: { $0.value.elementsEqual(actual) }) else { return false }
            found = entry.limits
            return true
        }
        return fits == nil ? nil : found
    }

    /// Where a path's first segment lies: after its leading `/`, up to the next `/` or the end.
    private static func firstSegment(of path: Substring) -> Range<Int> {
        path.withUTF8Bytes { bytes in
            guard bytes.first == UInt8(ascii: "/") else { return 0..<0 }
            let end = bytes[1...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            return 1..<end
        }
    }

    /// Whether `path`'s bytes in `range` are `literal`.
    private static func equal(_ range: Range<Int>, _ literal: [UInt8], in path: Substring) -> Bool {
        guard range.count == literal.count else { return false }
        guard !literal.isEmpty else { return true }
        return path.withUTF8Bytes { bytes in
            literal.withUnsafeBufferPointer { memcmp(bytes.baseAddress! + range.lowerBound, $0.baseAddress!, range.count) == 0 }
        }
    }

    private static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ text: Substring) -> Bool {
        text.withUTF8Bytes { literal in
            literal.count == bytes.count && (bytes.isEmpty || memcmp(bytes.baseAddress!, literal.baseAddress!, bytes.count) == 0)
        }
    }
}

extension Router.Handler {
    fileprivate var isAsync: Bool {
        if case .async = self { return true }
        return false
    }
}

extension Router.Segment {
    fileprivate var isLiteral: Bool {
        if case .literal = self { return true }
        return false
    }
}

/// Answers a ``Router/Handler/loop(_:)`` route, once: a response or an error (which becomes its
/// HTTP answer in ``Application``, the one place errors are mapped). From any thread.
public struct RouteResponder: Sendable {
    let call: LoopCall

    public func respond(_ response: consuming ServerResponse) { call.respond(response) }

    public func fail(_ error: any Error) { call.fail(error) }
}

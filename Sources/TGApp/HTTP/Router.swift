public import HTTPTypes
public import TGHTTPServer

/// What a route handler is given besides the request.
public struct RequestInfo: Sendable {
    /// The request id (from a well-formed `X-Request-ID`, else generated); echoed in the response.
    public var requestID: String
    /// Values of the route's `{name}` segments (and `rest` for a trailing `**`), percent-decoded.
    public var parameters: [String: String]
    /// The client's address as TokenGate sees it.
    public var clientAddress: String?

    public init(requestID: String, parameters: [String: String] = [:], clientAddress: String? = nil) {
        self.requestID = requestID
        self.parameters = parameters
        self.clientAddress = clientAddress
    }
}

/// Maps method and path to a handler. Literal paths are found by hashing; patterns with `{name}`
/// segments or a trailing `**` are tried in the order they were added.
public struct Router: Sendable {
    /// A handler that needs no I/O runs on the event-loop thread (`sync`); anything else is `async`.
    public enum Handler: Sendable {
        case sync(@Sendable (ServerRequest, RequestInfo) -> ServerResponse)
        case async(@Sendable (ServerRequest, RequestInfo) async throws -> ServerResponse)
    }

    struct Route: Sendable {
        var method: HTTPRequest.Method
        var pattern: String
        var segments: [Substring]
        var handler: Handler
    }

    private var literal: [String: [Route]] = [:]
    private var patterns: [Route] = []

    public init() {}

    /// Every route as (method, pattern), sorted: what `openapi.yaml` must describe.
    public var routes: [(method: String, pattern: String)] {
        (literal.values.flatMap { $0 } + patterns).map { ($0.method.rawValue, $0.pattern) }.sorted {
            ($0.pattern, $0.method) < ($1.pattern, $1.method)
        }
    }

    /// Adds a route. `pattern` is a path such as `/auth/token`, `/auth/accounts/{id}` or
    /// `/api/{upstream}/**`.
    public mutating func add(_ method: HTTPRequest.Method, _ pattern: String, _ handler: Handler) {
        let segments = pattern.split(separator: "/", omittingEmptySubsequences: false)
        let route = Route(method: method, pattern: pattern, segments: segments, handler: handler)
        if segments.contains(where: { $0.hasPrefix("{") || $0 == "**" }) {
            patterns.append(route)
        } else {
            literal[pattern, default: []].append(route)
        }
    }

    /// The outcome of matching a request.
    enum Match {
        case found(Route, [String: String])
        /// The path exists but not for this method; the allowed methods.
        case methodNotAllowed([HTTPRequest.Method])
        case notFound
    }

    func match(_ method: HTTPRequest.Method, path: Substring) -> Match {
        var allowed: [HTTPRequest.Method] = []
        if let routes = literal[String(path)] {
            if let route = routes.first(where: { $0.method == method }) { return .found(route, [:]) }
            allowed += routes.map(\.method)
        }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        for route in patterns {
            guard let parameters = Self.bind(route.segments, to: segments) else { continue }
            if route.method == method { return .found(route, parameters) }
            allowed.append(route.method)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    private static func bind(_ pattern: [Substring], to path: [Substring]) -> [String: String]? {
        var parameters: [String: String] = [:]
        for (index, expected) in pattern.enumerated() {
            if expected == "**" {
                parameters["rest"] = path[index...].joined(separator: "/")
                return parameters
            }
            guard index < path.count else { return nil }
            let actual = path[index]
            if expected.hasPrefix("{"), expected.hasSuffix("}") {
                guard !actual.isEmpty, let value = FormURLEncoding.percentDecode(actual.utf8, plusAsSpace: false) else {
                    return nil
                }
                parameters[String(expected.dropFirst().dropLast())] = value
            } else if expected != actual {
                return nil
            }
        }
        return pattern.count == path.count ? parameters : nil
    }
}

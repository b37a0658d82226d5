public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// How the library's requests reach the network: URLSession by default; an app may pass its own
/// (a session with its own configuration, a transport that records calls in tests).
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the answer as it came, without following redirects to
    /// another origin's credentials (the library adds tokens to its own requests only).
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
}

/// ``HTTPTransport`` over a `URLSession` of its own that never follows a redirect: a 3xx comes
/// back as it is, so an `Authorization` header can never travel to the origin a `Location` names
/// (``TokenGateClient/data(for:account:)`` follows the gateway's own redirects itself).
public struct URLSessionTransport: HTTPTransport {
    let session: URLSession

    public init(configuration: URLSessionConfiguration = .default) {
        session = URLSession(configuration: configuration, delegate: RedirectRefusal(), delegateQueue: nil)
    }

    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw TokenGateClientError.invalidResponse("not an HTTP answer") }
        return (data, http)
    }
}

/// Hands every redirect back to the caller instead of following it.
final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

/// The gateway's answers as the library reads them.
struct GatewayAnswer {
    let status: Int
    let data: Data
    let response: HTTPURLResponse

    init(_ data: Data, _ response: HTTPURLResponse) {
        self.data = data
        self.response = response
        status = response.statusCode
    }

    func header(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }

    /// The JSON object of the body, or nil.
    var object: [String: Any]? { (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] }

    /// `error` of an RFC 6749 answer or `code` of a problem+json one.
    var errorCode: String? { object.flatMap { ($0["error"] as? String) ?? ($0["code"] as? String) } }

    var errorDetail: String? { object.flatMap { ($0["error_description"] as? String) ?? ($0["detail"] as? String) } }

    /// Seconds from `Retry-After`, when it holds a number.
    var retryAfter: Int? { header("Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw TokenGateClientError.invalidResponse("\(T.self): \(error)")
        }
    }

    /// The typed error for an answer the caller did not expect: the cases apps act on, else
    /// ``TokenGateClientError/server(status:code:detail:)``.
    func failure(account: String? = nil) -> TokenGateClientError {
        let code = errorCode
        switch code {
        case "interaction_required", "invalid_grant":
            let object = object
            return .signInRequired(
                account: account ?? (object?["account_id"] as? String),
                provider: object?["provider"] as? String,
                loginHint: object?["login_hint"] as? String
            )
        case "consent_required":
            let scope = object?["scope"] as? String ?? ""
            return .consentRequired(scopes: scope.split(separator: " ").map(String.init))
        default:
            if status == 503 || code == "temporarily_unavailable" { return .unavailable(retryAfter: retryAfter) }
            return .server(status: status, code: code, detail: errorDetail)
        }
    }
}

/// `application/x-www-form-urlencoded` bodies and queries (RFC 3986's unreserved set kept).
enum Form {
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// The first value of each query parameter of `url`.
    static func query(of url: URL) -> [String: String] {
        var values: [String: String] = [:]
        for item in URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? [] where values[item.name] == nil {
            values[item.name] = item.value ?? ""
        }
        return values
    }
}

/// Scheme, host and port: what "the gateway's origin" compares.
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: Int

    init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        self.scheme = scheme
        self.host = host
        port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
    }
}

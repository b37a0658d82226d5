import Foundation
import HTTPTypes
import TGBase
public import TGHTTPClient
import TGHTTPServer

extension FakeIdentityProvider {
    /// Plays the browser: GETs `authorizationURL` (as a client built it) without following the
    /// redirect, and returns where the provider sent the user with which parameters: the
    /// redirect's query, or the fields of a `form_post` page.
    public func followAuthorization(
        _ authorizationURL: String,
        using client: HTTPClient? = nil,
        timeout: Duration = .seconds(10)
    ) async throws -> AuthorizationResult {
        guard let components = URLComponents(string: authorizationURL), let scheme = components.scheme,
            let host = components.host
        else { throw HTTPClientError.invalidURL }
        let authority = host + (components.port.map { ":\($0)" } ?? "")
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        let target = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        let http: HTTPClient
        if let client {
            http = client
        } else {
            var configuration = HTTPClient.Configuration()
            configuration.allowPlainHTTPToLoopbackForTesting = true
            http = HTTPClient(configuration: configuration)
        }
        defer { if client == nil { http.shutdown() } }
        let request = HTTPRequest(method: .get, scheme: scheme, authority: authority, path: target)
        let response = try await http.send(request, timeout: timeout)
        let body = String(decoding: response.body, as: UTF8.self)
        var result = AuthorizationResult(status: response.head.status.code, destination: nil, parameters: [:], body: body)
        if let location = response.head.headerFields[.location] {
            result.destination = location
            result.parameters = Self.queryParameters(of: location)
        } else if let form = Self.formPost(in: body) {
            result.destination = form.action
            for (name, value) in form.fields where result.parameters[name] == nil { result.parameters[name] = value }
        }
        return result
    }

    /// The query parameters of `url` (first value of each), decoded.
    public static func queryParameters(of url: String) -> [String: String] {
        var withoutFragment = Substring(url)
        if let hash = withoutFragment.firstIndex(of: "#") { withoutFragment = withoutFragment[..<hash] }
        guard let mark = withoutFragment.firstIndex(of: "?") else { return [:] }
        var parameters: [String: String] = [:]
        for (name, value) in FormURLEncoding.decode(withoutFragment[withoutFragment.index(after: mark)...]) where parameters[name] == nil {
            parameters[name] = value
        }
        return parameters
    }

    /// The action and hidden fields of a `form_post` page as this fake writes it, or nil when
    /// `html` holds no such form.
    public static func formPost(in html: String) -> (action: String, fields: [(name: String, value: String)])? {
        guard let action = attribute("action", in: html[...]) else { return nil }
        var fields: [(name: String, value: String)] = []
        var rest = html[...]
        while let start = rest.range(of: "<input ") {
            rest = rest[start.upperBound...]
            guard let end = rest.firstIndex(of: ">") else { break }
            let tag = rest[..<end]
            if let name = attribute("name", in: tag), let value = attribute("value", in: tag) { fields.append((name, value)) }
        }
        return (action, fields)
    }

    private static func attribute(_ name: String, in text: Substring) -> String? {
        guard let start = text.range(of: " \(name)=\"") else { return nil }
        let rest = text[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return unescapeHTML(rest[..<end])
    }

    private static func unescapeHTML(_ text: Substring) -> String {
        var out = String(text)
        for (entity, character) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#39;", "'"), ("&amp;", "&")] {
            out = out.replacingOccurrences(of: entity, with: character)
        }
        return out
    }
}

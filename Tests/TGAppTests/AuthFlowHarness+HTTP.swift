import Foundation
import HTTPTypes
import TGAppTesting
import TGBase
import TGTesting
import Testing

// The app's requests to TokenGate, by the harness's transport (AuthFlowSupport.swift).

extension AuthFlowHarness {
    /// `GET path?query` from the app, by the harness's transport, to the first instance or to
    /// `instance`.
    func get(
        _ path: String,
        query: [(String, String)] = [],
        bearer: String? = nil,
        headers: [String] = [],
        at instance: Instance? = nil
    ) async throws -> TestResponse {
        let target = path + (query.isEmpty ? "" : "?" + FormURLEncoding.encode(query.map { (name: $0.0, value: $0.1) }))
        switch transport {
        case .inProcess:
            return await (instance?.client ?? client).get(target, bearer: bearer, headers: try Self.fields(headers))
        case .sockets:
            var arguments = ["-i", (instance?.baseURL ?? baseURL) + target]
            if let bearer { arguments += ["-H", "Authorization: Bearer \(bearer)"] }
            for header in headers { arguments += ["-H", header] }
            return TestResponse(try await curl(arguments))
        }
    }

    /// `POST path` with a form body from the app, by the harness's transport.
    func post(_ path: String, form: [(String, String)], bearer: String? = nil, headers: [String] = []) async throws -> TestResponse {
        switch transport {
        case .inProcess:
            return await client.post(path, form: form, bearer: bearer, headers: try Self.fields(headers))
        case .sockets:
            var arguments = [
                "-i", "-X", "POST", baseURL + path, "-H", "Content-Type: application/x-www-form-urlencoded",
                "--data-raw", FormURLEncoding.encode(form.map { (name: $0.0, value: $0.1) }),
            ]
            if let bearer { arguments += ["-H", "Authorization: Bearer \(bearer)"] }
            for header in headers { arguments += ["-H", header] }
            return TestResponse(try await curl(arguments))
        }
    }

    /// `DELETE path` from the app, by the harness's transport.
    func delete(_ path: String, bearer: String) async throws -> TestResponse {
        switch transport {
        case .inProcess: return await client.delete(path, bearer: bearer)
        case .sockets: return TestResponse(try await curl(["-i", "-X", "DELETE", baseURL + path, "-H", "Authorization: Bearer \(bearer)"]))
        }
    }

    /// `url` (a URL of this instance's, such as the callback the provider sent the browser to),
    /// with `method` and, when given, a form body; by the harness's transport.
    func call(_ url: String, method: HTTPRequest.Method = .get, form: [(String, String)]? = nil) async throws -> TestResponse {
        let body = form.map { FormURLEncoding.encode($0.map { (name: $0.0, value: $0.1) }) }
        guard transport == .inProcess else {
            var arguments = [method == .head ? "-I" : "-i", "-X", method.rawValue, url]
            if let body { arguments += ["-H", "Content-Type: application/x-www-form-urlencoded", "--data-raw", body] }
            return TestResponse(try await curl(arguments))
        }
        #expect(url.hasPrefix(baseURL + "/"), "not TokenGate's: \(url)")
        let target = String(url.dropFirst(baseURL.count))
        guard let body else { return await client.execute(uri: target, method: method) }
        return await client.execute(
            uri: target,
            method: method,
            headers: [.contentType: "application/x-www-form-urlencoded"],
            body: Array(body.utf8)
        )
    }

    /// `Name: value` lines as fields.
    static func fields(_ lines: [String]) throws -> HTTPFields {
        var fields = HTTPFields()
        for line in lines {
            let colon = try #require(line.firstIndex(of: ":"), "not a header line: \(line)")
            let name = try #require(HTTPField.Name(String(line[..<colon])))
            fields.append(HTTPField(name: name, value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return fields
    }
}

extension TestResponse {
    /// What the system curl run with `-i` got: status, the head's fields, the body.
    init(_ result: CurlResult) {
        var fields = HTTPFields()
        if let end = result.stdout.range(of: "\r\n\r\n") {
            for line in result.stdout[..<end.lowerBound].split(separator: "\r\n").dropFirst() {
                guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else { continue }
                fields.append(HTTPField(name: name, value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
        }
        self.init(status: result.status ?? 0, headerFields: fields, bytes: Array(result.body.utf8))
    }
}

extension CurlResult {
    /// A response header's value (curl run with `-i`), case-insensitively.
    func header(_ name: String) -> String? {
        guard let end = stdout.range(of: "\r\n\r\n") else { return nil }
        for line in stdout[..<end.lowerBound].split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == name.lowercased() {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    var json: [String: Any] { decodeJSON(body) }
}

import Foundation
public import HTTPTypes
public import TGBase
import TGCrypto
public import TGHTTPServer

/// An error that knows the HTTP answer it stands for. The application's single catch site
/// (``Application``) answers these as they say; every other error becomes a bare 500 that is
/// logged and never shown.
public protocol HTTPResponseError: Error {
    func response() -> ServerResponse
}

/// An RFC 9457 problem document with TokenGate's stable `code` that apps can switch on.
public struct Problem: HTTPResponseError, Equatable {
    public var status: HTTPResponse.Status
    public var code: String
    public var title: String
    public var detail: String
    public var headerFields: HTTPFields
    /// Extension members (RFC 9457 §3.2), e.g. what a new login needs.
    public var members: [String: String]
    /// Extension members that are not strings (a number of seconds, say).
    public var values: [String: JSONValue] = [:]

    public init(
        status: HTTPResponse.Status,
        code: String,
        title: String? = nil,
        detail: String,
        headerFields: HTTPFields = HTTPFields(),
        members: [String: String] = [:]
    ) {
        self.status = status
        self.code = code
        self.title = title ?? status.reasonPhrase
        self.detail = detail
        self.headerFields = headerFields
        self.members = members
    }

    public func response() -> ServerResponse {
        var object = members.mapValues(JSONValue.string).merging(values) { $1 }
        object["type"] = .string("about:blank")
        object["title"] = .string(title)
        object["status"] = .number(Double(status.code))
        object["code"] = .string(code)
        object["detail"] = .string(detail)
        var fields = headerFields
        fields[.cacheControl] = "no-store"
        return JSON.response(status, JSONValue.object(object), contentType: "application/problem+json", headerFields: fields)
    }

    public static func notFound() -> Problem {
        Problem(status: .notFound, code: "not_found", detail: "No route matches this path. See /openapi.yaml for the API.")
    }

    public static func methodNotAllowed(_ allowed: [HTTPRequest.Method]) -> Problem {
        let list = allowed.map(\.rawValue).joined(separator: ", ")
        return Problem(
            status: .methodNotAllowed,
            code: "method_not_allowed",
            detail: "This path accepts \(list).",
            headerFields: [.allow: list]
        )
    }

    public static func internalError(requestID: String) -> Problem {
        Problem(
            status: .internalServerError,
            code: "internal_error",
            detail: "Something failed inside TokenGate. Quote request id \(requestID) when reporting it."
        )
    }
}

/// How every route writes JSON: one `Encodable` value (a `Codable` document with the wire's
/// snake_case keys, or ``JSONValue`` for open-ended members) encoded once, keys sorted (stable
/// output for clients and tests) and slashes not escaped (``SortedJSON/encode(_:)``).
public enum JSON {
    public static func encode(_ value: some Encodable) -> [UInt8] {
        // What routes encode is strings, numbers, booleans and containers of them: it cannot fail.
        (try? SortedJSON.encode(value)) ?? Array("{}".utf8)
    }

    /// A response with `value` as its body.
    public static func response(
        _ status: HTTPResponse.Status,
        _ value: some Encodable,
        contentType: String = "application/json",
        headerFields: HTTPFields = [.cacheControl: "no-store"]
    ) -> ServerResponse {
        var fields = headerFields
        fields[.contentType] = contentType
        return ServerResponse(status: status, headerFields: fields, body: .bytes(encode(value)))
    }
}

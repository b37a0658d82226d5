import Foundation
import TGBase
import TGHTTPClient
import TGHTTPServer

/// An API's demand for a stronger or fresher sign-in than its token carries: RFC 9470's
/// `WWW-Authenticate: Bearer error="insufficient_user_authentication"` with `acr_values` and/or
/// `max_age`, or Entra's claims challenge (`error="insufficient_claims"` with a base64 `claims`
/// request). A refresh cannot raise either, so the proxy never retries one: the app is told what
/// its sign-in must do.
public struct StepUpChallenge: Sendable, Equatable {
    /// Space-separated authentication context classes, as the API sent them.
    public var acrValues: String?
    /// The most seconds since the user last authenticated.
    public var maxAge: Int?
    /// The OpenID Connect claims request (a JSON object), decoded from the challenge's base64.
    public var claims: String?

    public init(acrValues: String? = nil, maxAge: Int? = nil, claims: String? = nil) {
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.claims = claims
    }

    /// The longest challenge field read; anything longer is not a step-up.
    static let fieldLimit = 4096
    /// The longest decoded claims request passed on.
    static let claimsLimit = 2048

    /// The challenge of a 401's `WWW-Authenticate` fields, if one is a step-up the app can act on.
    static func find(in head: RawHead) -> StepUpChallenge? {
        var found: StepUpChallenge?
        head.forEachField { name, value in
            guard found == nil, RawHeaderFields.equalsIgnoringCase(name, "www-authenticate"), value.count <= fieldLimit else { return }
            found = parse(String(decoding: value, as: UTF8.self))
        }
        return found
    }

    /// Reads one field's auth-params (RFC 9110 §11.2) and keeps a step-up's; nil for any other
    /// challenge, or one whose values could not be passed on safely.
    static func parse(_ field: String) -> StepUpChallenge? {
        let parameters = authParameters(field)
        let value = { (name: String) in parameters.first { $0.name == name }?.value }
        switch value("error") {
        case "insufficient_user_authentication":
            var challenge = StepUpChallenge()
            if let acr = value("acr_values") {
                let values = acr.split(separator: " ")
                guard !values.isEmpty, values.count <= 8,
                    values.allSatisfy({ $0.utf8.count <= 256 && $0.utf8.allSatisfy { (0x21...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C } })
                else { return nil }
                challenge.acrValues = values.joined(separator: " ")
            }
            if let age = value("max_age") {
                guard age.utf8.count <= 9, age.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int(age) else { return nil }
                challenge.maxAge = seconds
            }
            guard challenge.acrValues != nil || challenge.maxAge != nil else { return nil }
            return challenge
        case "insufficient_claims":
            guard let encoded = value("claims"), let claims = decodeClaims(encoded) else { return nil }
            return StepUpChallenge(claims: claims)
        default:
            return nil
        }
    }

    /// A base64 (or base64url) JSON object of at most ``claimsLimit`` bytes, as text.
    static func decodeClaims(_ encoded: String) -> String? {
        var text = encoded.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: text), data.count <= claimsLimit,
            case .object = JSONValue(parsing: Array(data)), let json = String(data: data, encoding: .utf8)
        else { return nil }
        return json
    }

    /// `name=value` pairs of a challenge field, values unquoted (a token or a quoted string with
    /// `\` escapes), names lowercased; scheme names and `token68`s are passed over.
    static func authParameters(_ field: String) -> [(name: String, value: String)] {
        let bytes = Array(field.utf8)
        var parameters: [(name: String, value: String)] = []
        var index = 0
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        let isTokenByte = { (byte: UInt8) in byte > 0x20 && byte < 0x7F && !"\",;=\\()<>@:/[]?{}".utf8.contains(byte) }
        while index < bytes.count {
            while index < bytes.count, isSpace(bytes[index]) || bytes[index] == UInt8(ascii: ",") { index += 1 }
            let start = index
            while index < bytes.count, isTokenByte(bytes[index]) { index += 1 }
            let name = String(decoding: bytes[start..<index], as: UTF8.self).lowercased()
            var look = index
            while look < bytes.count, isSpace(bytes[look]) { look += 1 }
            guard !name.isEmpty, look < bytes.count, bytes[look] == UInt8(ascii: "=") else {
                // A scheme name or a token68: skip to the next space or comma.
                index = max(index, start + 1)
                while index < bytes.count, !isSpace(bytes[index]), bytes[index] != UInt8(ascii: ",") { index += 1 }
                continue
            }
            index = look + 1
            while index < bytes.count, isSpace(bytes[index]) { index += 1 }
            var value: [UInt8] = []
            if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count { index += 1 }
                    value.append(bytes[index])
                    index += 1
                }
                index += 1
            } else {
                while index < bytes.count, isTokenByte(bytes[index]) || bytes[index] == UInt8(ascii: "/") || bytes[index] == UInt8(ascii: "=") {
                    value.append(bytes[index])
                    index += 1
                }
            }
            parameters.append((name, String(decoding: value, as: UTF8.self)))
        }
        return parameters
    }
}

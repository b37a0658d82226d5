public import Foundation
import TGBase

/// What a sign-in must prove (RFC 9470 §4): an authentication context class among `acrValues`,
/// and an authentication no older than `maxAge` seconds. Sent to the provider as `acr_values`
/// and `max_age` (OIDC Core §3.1.2.1), and checked on the ID token it returns (RFC 9470 §5:
/// a provider may sign the user in some other way than asked, and say so only in the token).
public struct AuthenticationRequirement: Sendable, Hashable, Codable {
    /// Acceptable `acr` values, most preferred first; empty: any.
    public var acrValues: [String]
    /// The most seconds since the user last authenticated; nil: any.
    public var maxAge: Int?

    /// The longest `max_age` taken (a year): anything longer asks for nothing.
    public static let maxAgeLimit = 365 * 24 * 3600
    /// The most `acr_values` taken, and the longest one.
    static let acrValueCount = 8
    static let acrValueLength = 256

    public init(acrValues: [String] = [], maxAge: Int? = nil) {
        self.acrValues = acrValues
        self.maxAge = maxAge
    }

    /// Asks for nothing.
    public var isEmpty: Bool { acrValues.isEmpty && maxAge == nil }

    /// Reads `acr_values` (space-separated) and `max_age` (decimal seconds) as an app or an API
    /// sends them; throws a message that says what is wrong.
    public init(acrValues: String?, maxAge: String?) throws(OIDCError) {
        self.init()
        if let acrValues {
            let values = acrValues.split(separator: " ").map(String.init)
            guard !values.isEmpty, values.count <= Self.acrValueCount,
                values.allSatisfy({
                    $0.utf8.count <= Self.acrValueLength && $0.utf8.allSatisfy { (0x21...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C }
                })
            else {
                throw OIDCError(
                    .invalidRequest(
                        "acr_values must be 1 to \(Self.acrValueCount) space-separated values of visible ASCII (no quotes or backslashes), "
                            + "each at most \(Self.acrValueLength) characters"
                    )
                )
            }
            self.acrValues = values
        }
        if let maxAge {
            guard maxAge.utf8.count <= 9, maxAge.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int(maxAge),
                seconds <= Self.maxAgeLimit
            else {
                throw OIDCError(.invalidRequest("max_age must be a number of seconds from 0 to \(Self.maxAgeLimit)"))
            }
            self.maxAge = seconds
        }
    }

    /// The authorization request's parameters for it.
    var parameters: [(name: String, value: String)] {
        var parameters: [(name: String, value: String)] = []
        if !acrValues.isEmpty { parameters.append(("acr_values", acrValues.joined(separator: " "))) }
        if let maxAge { parameters.append(("max_age", String(maxAge))) }
        return parameters
    }

    /// Why `token` does not meet the requirement at `now`, or nil when it does. A provider that
    /// signs in with an `acr` other than those asked, leaves `acr` out when one was asked, or
    /// leaves out `auth_time` when `max_age` was asked (OIDC Core §2 makes it required then),
    /// does not meet it.
    public func shortfall(of token: IDToken, now: Date, clockSkew: Duration = .seconds(60)) -> String? {
        if !acrValues.isEmpty {
            guard let acr = token.authenticationContext else {
                return "the provider's ID token names no authentication context (acr); one of \(acrValues.joined(separator: " ")) was asked"
            }
            guard acrValues.contains(acr) else {
                return "the provider signed the user in with acr \(acr), not one of \(acrValues.joined(separator: " "))"
            }
        }
        if let maxAge {
            guard let authTime = token.authenticationTime else {
                return "the provider's ID token has no auth_time, which max_age requires"
            }
            let age = now.timeIntervalSince(authTime)
            guard age <= TimeInterval(maxAge) + TimeInterval(clockSkew.components.seconds) else {
                return "the provider's sign-in is \(Int(age)) seconds old, more than max_age \(maxAge)"
            }
        }
        return nil
    }
}

extension IDToken {
    /// The authentication context class of the sign-in (`acr`), when the token names one.
    public var authenticationContext: String? {
        guard let acr = claims["acr"]?.stringValue, !acr.isEmpty, acr.utf8.count <= AuthenticationRequirement.acrValueLength else {
            return nil
        }
        return acr
    }

    /// When the user last authenticated (`auth_time`), when the token says.
    public var authenticationTime: Date? {
        claims["auth_time"]?.integerValue.map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }
}
